#pragma once
// `dpv train --ddp`: DistributedDataParallel training on the same data as `dpv train`, either as
// in-process ranks (one per device of --devices) or, under `dpv launch`, as one rank per process.
// --batch is the GLOBAL batch; rank r trains on DistributedSampler's (strided) share of it. The
// progress line shows rank 0's own loss and accuracy (DDP averages gradients, not losses), printed
// by rank 0 only. With --trace, every launched rank writes its own Chrome trace (TRACE.rank<r>.json)
// and rank 0 also writes TRACE: all ranks' traces merged, a process per rank.
#include <optional>
#include <string>

#include "cli/checkpoint.h"
#include "cli/lab_step_json.h"
#include "cli/train_loop.h"
#include "engine/datasets.h"
#include "engine/ddp/comm_hooks/comm_hook.h"
#include "engine/run/run_spec.h"

namespace dpv::cli {

struct TrainDdpInputs {
  std::string model_label;  // the preset or model file, for the header line
  RunSpec run;              // model, global batch, devices, optimizer, seed, DDP's options
  Dataset data;
  int64_t steps = 0;
  bool devices_given = true;  // false: a launched rank takes the launcher's device (cli/ddp_launched.h)
  std::string trace;
  int trace_steps = 5;
  CheckpointOptions checkpoint;  // rank 0 writes; every rank resumes from the file rank 0 chose
  std::string step_json;         // --step-json: rank 0's measure of every step (cli/lab_step_json.h)
  // --simulated-rate/--simulated-delay: in-process ranks over a simulated link (cli/lab_simulated_ranks.h)
  std::optional<SimulatedLinkFacts> simulated_link;
  // --comm-hook: register_comm_hook on every rank (launched or simulated ranks; not with --checkpoint,
  // which does not keep the hook's state)
  CommHookOptions comm_hook;
  // --probe-hook-error: after the --steps steps, one more step that also measures the hook's
  // gradient error against the exact average (engine/ddp/comm_hooks/hook_error.h); --step-json
  // records it on that step, which the lab's medians leave out. Needs --comm-hook and --step-json.
  bool probe_hook_error = false;
};

void run_train_ddp(const TrainDdpInputs& in);

// The header line, `how` naming where the `world` ranks run; flushed.
void print_ddp_header(const TrainDdpInputs& in, int world, const std::string& how);
// DDP's options for every rank: the run's, with the communication hook.
DdpOptions train_ddp_options(const TrainDdpInputs& in);
// What the training loop takes (with --probe-hook-error, one step more); `progress`: this rank
// prints the progress line.
TrainLoopInputs ddp_loop_inputs(const TrainDdpInputs& in, bool progress);

// "trace.json" -> "trace.rank1.json": where launched rank r writes its own trace.
std::string rank_trace_path(const std::string& trace, int rank);

}  // namespace dpv::cli
