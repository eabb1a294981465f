#include "cli/train_ddp.h"

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include "cli/ddp_launched.h"
#include "cli/flag_errors.h"
#include "cli/lab_simulated_ranks.h"
#include "cli/train_loop.h"
#include "engine/ddp/ddp_rank_strategy.h"
#include "engine/process_groups/gather_bytes.h"
#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/trace_merge.h"
#include "engine/model.h"
#include "engine/trace.h"

namespace dpv::cli {

void print_ddp_header(const TrainDdpInputs& in, int world, const std::string& how) {
  std::cout << "dpv train --ddp: " << in.model_label << " on " << in.data.name << " (" << in.data.inputs.dim(0)
            << " samples, " << in.data.classes << " classes), global batch " << in.run.batch << ", " << how << " ("
            << world << " rank" << (world == 1 ? "" : "s") << ", DistributedSampler shards "
            << (in.run.batch + world - 1) / world << " samples each), " << (in.run.sync_bn ? "SyncBatchNorm" : "per-rank BatchNorm") << ", lr " << in.run.optimizer.lr
            << "; progress: rank 0's loss and accuracy\n"
            << std::flush;  // through a pipe (the app's run as processes) the header shows before the first step ends
}

DdpOptions train_ddp_options(const TrainDdpInputs& in) {
  DdpOptions options = ddp_options(in.run);
  options.comm_hook = in.comm_hook;
  if (in.probe_hook_error) options.probe_hook_error_at = {in.steps + 1};  // the extra last step
  return options;
}

TrainLoopInputs ddp_loop_inputs(const TrainDdpInputs& in, bool progress) {
  TrainLoopInputs loop;
  loop.data = &in.data;
  loop.batch = in.run.batch;
  loop.steps = in.steps + (in.probe_hook_error ? 1 : 0);
  loop.traced = !in.trace.empty();
  loop.trace_steps = in.trace_steps;
  loop.progress = progress;
  return loop;
}

namespace {

// The checkpoint every rank resumes from: the one rank 0 found, its bytes sent to all ranks through
// the group, so every rank starts from the same step whatever each one's view of the folder. When
// rank 0 cannot use the folder, every rank stops with rank 0's error (not a broken collective).
std::optional<FoundCheckpoint> agreed_checkpoint(const TrainCheckpoints& checkpoints, LaunchedRank& lr) {
  if (!checkpoints.enabled()) return std::nullopt;
  // "N" none; "C<path length>:<path><bytes>" a checkpoint; "E<error class>:<message>" rank 0's error.
  std::string mine = "N";
  std::optional<Error> failed;
  if (lr.rank() == 0) {
    try {
      if (const auto found = checkpoints.find()) {
        // Built piecewise in a string of its own: GCC 12 warns falsely (-Wrestrict) on "C" + to_string.
        std::string entry = std::to_string(found->path.size());
        entry.insert(entry.begin(), 'C');
        entry += ':';
        entry += found->path;
        entry += found->bytes;
        mine = std::move(entry);
      }
    } catch (const Error& e) {
      failed = e;
      mine = "E" + std::to_string(static_cast<int>(e.error_class())) + ":" + e.what();
    }
  }
  const std::string chosen = all_gather_bytes(lr.session->group(), mine, lr.comm_device).at(0);
  if (failed) throw *failed;
  if (chosen[0] == 'E') {
    const size_t colon = chosen.find(':');
    throw Error(chosen.substr(colon + 1), static_cast<ErrorClass>(std::stoi(chosen.substr(1, colon - 1))));
  }
  if (chosen[0] == 'N') return std::nullopt;
  const size_t colon = chosen.find(':');
  const size_t length = std::stoull(chosen.substr(1, colon - 1));
  return FoundCheckpoint{chosen.substr(colon + 1, length), chosen.substr(colon + 1 + length)};
}

// One rank of a launched job, trained by the same loop as the in-process ranks (through
// DdpRankStrategy); rank 0 prints the header and the progress.
void run_launched(const TrainDdpInputs& in) {
  LaunchedRank lr = join_launched_job(in.devices_given ? std::optional(in.run.devices) : std::nullopt);
  verify_same_ddp_config(*lr.session, ddp_config_of(train_ddp_options(in), in.steps));
  ProcessGroup& group = lr.session->group();
  const int rank = lr.rank(), world = lr.world_size();
  const bool rank0 = rank == 0;
  const TrainCheckpoints checkpoints(in.checkpoint, checkpoint_facts(in.run, lr.devices_spec, world, in.data), in.run,
                                     in.steps, in.data.inputs.dim(0));
  const std::optional<TrainingState> resumed = checkpoints.resume(agreed_checkpoint(checkpoints, lr), rank0);
  Model model(in.run.model_spec());
  const TensorMap state = resumed ? resumed->model : model.initial_state(in.run.seed);
  DdpRankStrategy strategy(group, lr.devices, std::move(model), state, train_ddp_options(in));
  if (resumed) restore_training_state(strategy, *resumed);
  if (rank0) print_ddp_header(in, world, std::to_string(world) + " launched processes over " + group.backend());

  TraceRecorder trace;
  trace.set_process_name("dpviz DDP");
  TrainLoopInputs loop = ddp_loop_inputs(in, rank0);
  loop.first_step = resumed ? resumed->step : 0;
  // Rank 0 writes (every rank holds the same parameters and momentum; rank 0's buffers are DDP's).
  if (rank0 && checkpoints.enabled()) loop.after_step = [&](int64_t done) { checkpoints.after_step(strategy, done); };
  StepRecorder steps(rank0 ? in.step_json : std::string(), world, group.backend(), std::nullopt);
  steps.attach(loop, [&strategy] { return strategy.rank().hook_error(); });
  run_training_loop(strategy, loop, trace);
  steps.write();
  if (!in.trace.empty()) {
    const std::string mine = trace.to_json();
    write_file_atomic(rank_trace_path(in.trace, rank), mine);
    // Rank 0 also writes the merged trace; the ranks' traces travel through the group.
    const std::vector<std::string> all = all_gather_bytes(group, mine, lr.comm_device);
    if (rank0) {
      std::vector<std::string> names;
      for (int r = 0; r < world; ++r) names.push_back("rank " + std::to_string(r) + "'s trace");
      write_file_atomic(in.trace, merge_chrome_traces(all, names));
      std::cout << "trace: " << std::min<int64_t>(in.steps, in.trace_steps) << " iteration(s) of " << world
                << " ranks -> " << in.trace << " (merged, a process per rank; each rank's own in "
                << rank_trace_path(in.trace, 0) << " ...)\n";
    }
  }
  lr.session->shutdown();
}

void run_in_process(const TrainDdpInputs& in) {
  auto devices = devices_from_flag(in.run.devices);
  const TrainCheckpoints checkpoints(in.checkpoint, checkpoint_facts(in.run, in.run.devices, devices->size(), in.data),
                                     in.run, in.steps, in.data.inputs.dim(0));
  const std::optional<TrainingState> resumed = checkpoints.resume(checkpoints.find(), true);
  // in.run names DDP; a resumed run starts from the checkpoint's state dict.
  const std::unique_ptr<Strategy> strategy = make_strategy(in.run, devices, resumed ? &resumed->model : nullptr);
  if (resumed) restore_training_state(*strategy, *resumed);
  print_ddp_header(in, devices->size(), in.run.devices + " in-process ranks");
  TraceRecorder trace;
  trace.set_process_name("dpviz DDP");
  TrainLoopInputs loop = ddp_loop_inputs(in, true);
  loop.first_step = resumed ? resumed->step : 0;
  if (checkpoints.enabled()) loop.after_step = [&](int64_t done) { checkpoints.after_step(*strategy, done); };
  StepRecorder steps(in.step_json, static_cast<int>(devices->size()), strategy->transport(), std::nullopt);
  steps.attach(loop);
  run_training_loop(*strategy, loop, trace);
  steps.write();
  if (!in.trace.empty()) {
    trace.save(in.trace);
    std::cout << "trace: " << std::min<int64_t>(in.steps, in.trace_steps) << " iteration(s), " << trace.events().size()
              << " stages -> " << in.trace << "\n";
  }
}

}  // namespace

std::string rank_trace_path(const std::string& trace, int rank) {
  const std::string suffix = ".json";
  const bool json = trace.size() > suffix.size() && trace.compare(trace.size() - suffix.size(), suffix.size(), suffix) == 0;
  const std::string stem = json ? trace.substr(0, trace.size() - suffix.size()) : trace;
  return stem + ".rank" + std::to_string(rank) + ".json";
}

void run_train_ddp(const TrainDdpInputs& in) {
  if (in.probe_hook_error)
    check(in.comm_hook.kind != CommHookKind::None && !in.step_json.empty(),
          "--probe-hook-error measures a communication hook's gradient error into the step log: give it with "
          "--comm-hook and --step-json", ErrorClass::ValueError);
  if (in.comm_hook.kind != CommHookKind::None) {
    check(in.checkpoint.dir.empty(), "--comm-hook cannot be combined with --checkpoint: a checkpoint does not keep "
          "the hook's state (PowerSGD's error and Q), so a resumed run would differ", ErrorClass::ValueError);
    check(in.simulated_link || launched_rank(),
          "--comm-hook with train --ddp runs on launched ranks (dpv launch --nproc-per-node K -- train --ddp ...) or "
          "over a simulated link (--simulated-rate); for in-process ranks use dpv step --ddp --comm-hook",
          ErrorClass::ValueError);
  }
  if (in.simulated_link) {
    check(!launched_rank(), "--simulated-rate runs in-process ranks over a simulated link; under dpv launch the "
          "processes talk over the real network: leave --simulated-rate and --simulated-delay out",
          ErrorClass::ValueError);
    return run_simulated_ranks(in);
  }
  if (launched_rank()) return run_launched(in);
  run_in_process(in);
}

}  // namespace dpv::cli
