#pragma once
// What the Network page needs to know before it offers the real shaped link: whether the app has
// CAP_NET_ADMIN (netmodel::has_net_admin, the lab's own check) and which dpv binary runs the lab:
// the one beside the app or in the build tree (ProcessRun::findDpv), then the one on PATH.
#include "course/network_real.h"

namespace gui {

dpv::course::RealLinkFacts findRealLinkFacts();

}  // namespace gui
