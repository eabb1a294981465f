#pragma once
// The process side of `dpv launch` (torchrun's conventions): starts this node's workers as child
// processes of this same dpv binary, each with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT set, forwards their stderr with a "[rank r] " prefix, forwards
// SIGINT/SIGTERM to all of them (SIGHUP, a closed terminal, as SIGTERM), and when one fails stops
// the others (SIGTERM, then SIGKILL after a grace period) and reports that rank's error, or, with
// --max-restarts N, starts them all again up to N times, as torchrun's elastic agent does. It never
// waits forever on a dead job, and no worker outlives it (PR_SET_PDEATHSIG, cli/launch_worker.h).
#include <string>
#include <vector>

#include "engine/process_groups/multiprocess/process_group_backend.h"
#include "engine/error.h"

namespace dpv::cli {

struct LaunchPlan {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  dist::ProcessGroupBackend backend = dist::ProcessGroupBackend::Gloo;  // passed to the workers as DPV_BACKEND
  double timeout_s = 300;        // DPV_TIMEOUT: the workers' store and collective timeout
  std::string iface;             // GLOO_SOCKET_IFNAME when not empty
  std::vector<std::string> command;  // the dpv subcommand and its arguments
  double grace_s = 5;            // after the first failure: time the others get to exit on SIGTERM
  int max_restarts = 0;          // times all workers are started again after one failed (torchrun's default: 0)
};

class LaunchEvents;

// Runs the workers to the end, restarting them up to plan.max_restarts times, and records what
// happened in `events` (cli/launch_events.h). Returns normally when every worker of the last
// attempt exited with status 0; throws dpv::Error naming the failed rank and its error otherwise
// (a stopped rank that the others failed waiting for is the one named), or the signal that stopped the job.
void run_launch(const LaunchPlan& plan, LaunchEvents& events);

// The variable dpv launch sets in every worker's environment ("dpv launch"), and whether this
// process was started so.
inline constexpr const char* kLaunchedByVariable = "DPV_LAUNCHED_BY";
bool launched_by_dpv_launch();
// The dpv launch flags behind the settings an engine error is about (Error::settings):
// " (dpv launch sets MASTER_PORT from --master-port)", or "" when it names none of them.
std::string launch_flags_hint(const Error& e);

}  // namespace dpv::cli
