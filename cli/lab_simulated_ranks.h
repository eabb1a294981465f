#pragma once
// `dpv train --ddp --simulated-rate R [--simulated-delay D]`: the in-process ranks of --devices
// cpu:K, one thread each, every rank's DDP over a simulated link (engine/netmodel/
// simulated_link_group.h): each collective takes at least what the cost model says it would on a
// link of that rate and delay. No network is shaped, so every line that reports the run says
// "simulated". This is what `dpv lab network --simulated` runs where it cannot shape a real link.
// --trace and --checkpoint are refused with it (a simulated run is a measurement, not training to keep).
#include "cli/train_ddp.h"

namespace dpv::cli {

void run_simulated_ranks(const TrainDdpInputs& in);

}  // namespace dpv::cli
