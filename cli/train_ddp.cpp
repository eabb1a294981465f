#include "cli/train_ddp.h"

#include <chrono>
#include <iostream>
#include <memory>
#include <vector>

#include "cli/ddp_launched.h"
#include "cli/format.h"
#include "cli/progress.h"
#include "cli/train_loop.h"
#include "course/batchnorm_stats.h"
#include "engine/ddp/ddp.h"
#include "engine/ddp/sampler.h"
#include "engine/dist/gather_bytes.h"
#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/trace_merge.h"
#include "engine/model.h"
#include "engine/trace.h"

namespace dpv::cli {
namespace {

void print_header(const TrainDdpInputs& in, int world, const std::string& how) {
  std::cout << "dpv train --ddp: " << in.model_label << " on " << in.data.name << " (" << in.data.inputs.dim(0)
            << " samples, " << in.data.classes << " classes), global batch " << in.run.batch << ", " << how << " ("
            << world << " rank" << (world == 1 ? "" : "s") << ", DistributedSampler shards "
            << (in.run.batch + world - 1) / world << " samples each), " << (in.run.sync_bn ? "SyncBatchNorm" : "per-rank BatchNorm") << ", lr " << in.run.optimizer.lr
            << "; progress: rank 0's loss and accuracy\n"
            << std::flush;  // through a pipe (the app's run as processes) the header shows before the first step ends
}

// One launched rank's iteration, stage by stage, each stage timed and recorded as the in-process
// DDP iteration records them (the same stage kinds and titles, engine/ddp/ddp_iteration.cpp): the
// rank's compute on its device's lane, and its bucket all-reduces, carried by Finalize, where they
// ran on its communication thread (the lane right under it), overlapping the backward.
void run_traced_iteration(DdpRank& ddp, const std::function<double()>& clock, TraceRecorder& trace, int rank) {
  const double it0 = clock();
  int index = 0;
  const std::string label = "rank " + std::to_string(rank) + " (" + ddp.device().name() + ")";
  auto event = [&](StageKind kind, int layer, const std::string& title, double start, std::vector<CollectiveReport> reports) {
    StageEvent e;
    e.index = index++;
    e.stage = Stage{kind, layer, title};
    e.t_start = start - it0;
    e.t_end = clock() - it0;
    DeviceState d;
    d.device = 0;
    d.label = label;
    d.has_replica = true;
    d.busy_start = e.t_start;
    d.busy_end = e.t_end;
    e.devices.push_back(d);
    e.collectives = std::move(reports);
    return e;
  };
  auto record = [&](StageKind kind, int layer, const std::string& title, double start, std::vector<CollectiveReport> reports) {
    trace.on_stage(event(kind, layer, title, start, std::move(reports)));
  };
  double t = clock();
  if (ddp.will_sync_buffers()) {
    auto r = ddp.sync_buffers();
    record(StageKind::BroadcastBuffers, -1, "Broadcast buffers: rank 0's buffers to every rank", t, r);
  }
  const Model& model = ddp.model();
  for (int i = 0; i < model.num_layers(); ++i) {
    t = clock();
    auto r = ddp.forward_layer(i);
    record(StageKind::Forward, i, "Forward " + std::to_string(i) + ": " + model.layer(i).describe(), t, r);
  }
  t = clock();
  ddp.compute_loss();
  record(StageKind::Loss, -1, "Loss (this rank's shard)", t, {});
  for (int i = model.num_layers() - 1; i >= 0; --i) {
    t = clock();
    auto r = ddp.backward_layer(i);
    record(StageKind::Backward, i, "Backward " + std::to_string(i) + ": " + model.layer(i).describe(), t, r);
  }
  t = clock();
  ddp.finalize();
  StageEvent finalize = event(StageKind::Finalize, -1, "Finalize: wait for the bucket all-reduces, averaged gradients into .grad", t, {});
  const auto names = ddp.reducer().bucket_names();
  for (const BucketRun& b : ddp.reducer().runs()) {
    finalize.comm.push_back(CommSpan{0, b.bucket, b.launch - it0, b.start - it0, b.end - it0, b.bytes,
                                     names[static_cast<size_t>(b.bucket)], b.report, b.ring});
    finalize.collectives.push_back(b.report);
  }
  trace.on_stage(finalize);
  t = clock();
  ddp.optimizer_step();
  record(StageKind::Step, -1, "SGD step", t, {});
}

void run_launched(const TrainDdpInputs& in) {
  LaunchedRank lr = join_launched_job(in.devices_given ? std::optional(in.run.devices) : std::nullopt);
  ProcessGroup& group = lr.session->group();
  const int rank = lr.rank(), world = lr.world_size();
  const bool rank0 = rank == 0;
  Model model(in.run.model_spec());
  const TensorMap state = model.initial_state(in.run.seed);
  const auto t_origin = std::chrono::steady_clock::now();
  std::function<double()> clock = [t_origin] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_origin).count();
  };
  DdpRank ddp(group, lr.device, model, state, ddp_options(in.run), clock);
  SamplerOptions sampler;
  sampler.shuffle = false;
  const std::vector<int64_t> indices = distributed_sampler_indices(in.run.batch, world, rank, sampler);
  if (rank0) print_header(in, world, std::to_string(world) + " launched processes over " + group.backend());

  TraceRecorder trace;
  trace.set_process_name("dpviz DDP");
  std::unique_ptr<ProgressReporter> progress;
  if (rank0) progress = std::make_unique<ProgressReporter>(std::cout, in.steps, ProgressReporter::stdout_is_terminal());
  LossWindow window;
  ProgressSample sample;
  const int64_t n = in.data.inputs.dim(0);
  const auto t0 = std::chrono::steady_clock::now();
  int64_t begin = 0;
  for (int64_t step = 0; step < in.steps; ++step) {
    if (begin + in.run.batch > n) begin = 0;  // next epoch; the last partial batch is dropped
    Dataset b = take_batch(in.data, begin, in.run.batch);
    begin += in.run.batch;
    ddp.set_batch(b.inputs, b.targets, indices);
    if (!in.trace.empty() && step < in.trace_steps) {
      trace.begin_iteration();
      run_traced_iteration(ddp, clock, trace, rank);
    } else {
      ddp.run_iteration();
    }
    if (!rank0) continue;
    window.add(ddp.loss(), course::accuracy(ddp.output(), pick_rows(b.targets, indices)));
    sample = window.sample(step + 1, in.run.batch, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    progress->update(sample);
  }
  if (rank0) progress->finish(sample);
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
  auto devices = DeviceSet::create(in.run.devices);
  const std::unique_ptr<Strategy> strategy = make_strategy(in.run, devices);  // in.run names DDP
  print_header(in, devices->size(), in.run.devices + " in-process ranks");
  TraceRecorder trace;
  trace.set_process_name("dpviz DDP");
  TrainLoopInputs loop;
  loop.data = &in.data;
  loop.batch = in.run.batch;
  loop.steps = in.steps;
  loop.traced = !in.trace.empty();
  loop.trace_steps = in.trace_steps;
  run_training_loop(*strategy, loop, trace);
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
  if (launched_rank()) return run_launched(in);
  run_in_process(in);
}

}  // namespace dpv::cli
