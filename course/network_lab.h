#pragma once
// The network lab for the app, without root: DDP's in-process ranks over a simulated link
// (engine/netmodel/simulated_link_group.h), every point of a sweep measured and put beside the
// cost model's prediction, as `dpv lab network --simulated` does. Everything is a typed value (the
// link, each step's measure, the summary); every result says whether it is simulated, so a page
// that shows it can say so from the facts (course/network_real.h reads the real lab's points).
// Runs on the caller's thread (and one thread per rank): call it from a worker thread.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/ddp/comm_hooks/comm_hook.h"
#include "engine/model_spec.h"
#include "engine/netmodel/lab_summary.h"
#include "engine/netmodel/link_model.h"
#include "engine/netmodel/step_meter.h"

namespace dpv::course {

struct NetworkLabSetup {
  ModelSpec model;
  int world = 2;             // in-process ranks
  int64_t batch = 64;        // the global batch
  int steps = 6;             // iterations per point, the first kWarmupSteps left out of the summary
  uint64_t seed = 0;
  double bucket_cap_mb = 25;
  // register_comm_hook's hook on every rank (None: DDP's own all-reduce). A PowerSGD hook should
  // start compressing within the run (start_powerSGD_iter 2, as `dpv lab network` passes).
  CommHookOptions comm_hook;
  // With a hook: one step more that measures its gradient error against the exact average
  // (DdpOptions::probe_hook_error_at), as `dpv lab network` does; not timed, not in `steps`.
  bool probe_hook_error = true;
};

struct NetworkLabPoint {
  netmodel::Link link;
  CommHookOptions comm_hook;                 // the hook the ranks ran (None: DDP's all-reduce)
  int world = 0;                             // the ranks that ran
  bool simulated = true;                     // no packet crossed a network (in-process ranks)
  std::string simulated_reason;              // why not the real link; "" when simulated was chosen
  bool netem = false;                        // a real link: the kernel's netem applied the delay
  // Rank 0's, every timed step, not the probe (in-process); a real link's report holds rank 0's last step only.
  std::vector<netmodel::StepMeasure> steps;
  // Each rank's own last step, [world] in-process; [1] (rank 0's) on a real link, whose other
  // ranks log none.
  std::vector<netmodel::StepMeasure> last_step_by_rank;
  netmodel::PointSummary summary;            // measured beside predicted; hook_error from the probe
};

// One point: `setup`'s DDP run over a simulated `link`. Throws dpv::Error for a bad setup
// (world < 1, no steps, a model the data cannot feed) or when a rank fails.
NetworkLabPoint run_simulated_network_point(const NetworkLabSetup& setup, const netmodel::Link& link);

// Every link in turn, in order.
std::vector<NetworkLabPoint> run_simulated_network_sweep(const NetworkLabSetup& setup,
                                                         const std::vector<netmodel::Link>& links);

}  // namespace dpv::course
