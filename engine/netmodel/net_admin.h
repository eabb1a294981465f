#pragma once
// Whether this process may make network namespaces and shape links with tc: CAP_NET_ADMIN in its
// effective capabilities. The one check `dpv lab network` (cli/lab_netns.h) and the app's Network
// page (course/network_real.h) both ask, so the app offers the real link exactly where the lab
// would shape one.
namespace dpv::netmodel {

// CAP_NET_ADMIN (bit 12) in /proc/self/status CapEff; false when that cannot be read.
bool has_net_admin();

}  // namespace dpv::netmodel
