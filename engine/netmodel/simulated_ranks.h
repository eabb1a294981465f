#pragma once
// The in-process ranks of a simulated link, one thread each: the one place that starts them over
// SimulatedLinkGroup endpoints, stops the others when one fails (so none waits for ever in a
// collective), and rethrows the error of the rank that failed first. `dpv train --ddp
// --simulated-rate` and the course's network lab both run their ranks through it.
#include <functional>

#include "engine/netmodel/link_model.h"
#include "engine/process_groups/process_group.h"

namespace dpv::netmodel {

// Runs rank(group endpoint) for ranks 0 .. world-1 on their own threads over a simulated `link`;
// returns when all have finished.
void run_simulated_ranks(int world, const Link& link, const std::function<void(ProcessGroup&)>& rank);

}  // namespace dpv::netmodel
