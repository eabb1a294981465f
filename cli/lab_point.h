#pragma once
// One point of `dpv lab network`'s sweep: the DDP job run once on a link of one rate and delay
// with one bucket cap, and its step log read back (cli/lab_step_json.h). On a shaped link: node 0
// and node 1 are `dpv launch --nnodes 2` in the lab's two namespaces (K ranks each, Gloo over the
// veth pair); on a simulated one: `dpv train --ddp --devices cpu:2K --simulated-rate ...` here.
#include <string>
#include <vector>

#include "cli/lab_netns.h"
#include "cli/lab_step_json.h"

namespace dpv::cli {

struct LabJob {
  int nproc_per_node = 1;
  double timeout_s = 300;             // the job's --timeout; the lab waits 30 s more, then stops it
  std::vector<std::string> train;     // "train --ddp ..." as given after --
  std::string exe;                    // this dpv binary
  std::string work_dir;               // where the step logs go (the lab's temporary folder)
};

struct LabPoint {
  LinkShape shape;
  double bucket_cap_mb = 25;
  std::string comm_hook;  // train --comm-hook (allreduce, fp16, powersgd); "" for DDP's own all-reduce
};

// Runs the point on `network` (shaped first), or simulated when `network` is null. Throws
// dpv::Error naming the point and the failing node's last output lines when the job fails, times
// out or the lab is interrupted; the caller's LabNetwork then removes the namespaces.
StepLog run_lab_point(const LabJob& job, const LabPoint& point, LabNetwork* network, int index);

// The train arguments the lab sets itself; given after -- they are refused (ValueError).
void check_lab_train_command(const std::vector<std::string>& train);

}  // namespace dpv::cli
