// Scenarios about what DDP keeps and moves: BatchNorm buffers on each rank (rank 0's broadcast),
// memory per device against DataParallel, and the gradient buckets whose all-reduces overlap the
// backward (why DDP is faster than DataParallel).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "course/scenario_support.h"
#include "engine/error.h"
#include "engine/model.h"

namespace dpv::course::detail {

namespace {

std::string ms(double seconds) {
  std::ostringstream o;
  o.precision(3);
  o << seconds * 1e3 << " ms";
  return o.str();
}

std::string kib(int64_t bytes) {
  std::ostringstream o;
  o.precision(4);
  o << static_cast<double>(bytes) / 1024.0 << " KiB";
  return o.str();
}

// Highest memory each device reached over the recorded stages.
std::vector<int64_t> peaks_of(const Recorder& r, int devices) {
  std::vector<int64_t> peak(static_cast<size_t>(devices), 0);
  for (const auto& e : r.events)
    for (const auto& d : e.devices)
      if (d.device >= 0 && d.device < devices)
        peak[static_cast<size_t>(d.device)] = std::max({peak[static_cast<size_t>(d.device)], d.memory_peak, d.memory_bytes});
  return peak;
}

// The bucket-scenario model when none is given: the middle Linear alone is over DDP's 1 MiB first
// bucket, so after the rebuild the last two Linear layers share bucket 0 and the first layer gets
// bucket 1, launched only after bucket 0 has been in flight during the rest of the backward.
ModelSpec bucket_model() {
  return parse_model_spec(R"({"layers": [{"type": "linear", "in_features": 16, "out_features": 512},
                                          {"type": "relu"},
                                          {"type": "linear", "in_features": 512, "out_features": 640},
                                          {"type": "relu"},
                                          {"type": "linear", "in_features": 640, "out_features": 4}]})",
                          "the bucket scenario's model");
}

}  // namespace

ScenarioResult run_ddp_buffers(const Params& p) {
  const int world = p.integer("devices"), batch = p.integer("batch"), features = p.integer("features", 3);
  const std::string ask = p.text("ask");
  DdpOptions opt;
  opt.broadcast_buffers = p.flag("broadcast_buffers", true);
  opt.sync_bn = p.flag("sync_bn");
  const ModelSpec spec = batchnorm_scenario_model(features);
  // Rows drift with their index, so the ranks' strided shards have different means.
  const Tensor x = make_input({batch, features}, spec.dtype, 37, 0.5);
  const Tensor t = make_targets(batch, 2, 37);
  auto run = run_ddp(world, spec, x, t, opt);
  const std::string name = "0.running_mean";
  auto buffer = [&](int rank) { return run->trainer->rank(rank).buffers().at(name).to_doubles(); };
  ScenarioResult r;
  r.title = std::string(opt.sync_bn ? "SyncBatchNorm" : "BatchNorm1d") + "(" + std::to_string(features) +
            ") under DDP on cpu:" + std::to_string(world) + ", global batch " + std::to_string(batch) +
            (opt.broadcast_buffers ? "" : ", broadcast_buffers=False");
  if (opt.sync_bn) r.lines.push_back("SyncBatchNorm on CPU devices is dpviz's extension: PyTorch runs it on GPUs only.");
  r.lines.push_back("running_mean before training: " + format_values(run->initial_state.at(name).to_doubles()));
  const int last = world - 1;
  const std::vector<double> rank0 = buffer(0), own = buffer(last);
  for (int k = 0; k < world; ++k) r.lines.push_back("After step 1, rank " + std::to_string(k) + "'s running_mean: " + format_values(buffer(k)));
  const auto gap = [](const std::vector<double>& a, const std::vector<double>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
    return m;
  };
  r.facts = {{"rank 0 running_mean", format_values(rank0)}, {"rank " + std::to_string(last) + " running_mean", format_values(own)}};
  if (ask == "after_step") {
    const double d = gap(own, rank0);
    r.lines.push_back("Largest |rank " + std::to_string(last) + " - rank 0| = " + std::to_string(d) +
                      (opt.sync_bn ? ": every rank normalised with the same global statistics."
                                   : ": each rank updated its buffers from its own shard."));
    r.answer_value = d < 1e-6 ? "same" : "differs";
    return r;
  }
  // next_forward: run iteration 2 up to its first Forward stage.
  DdpIteration next(*run->trainer, x, t, nullptr);
  std::string stages;
  while (!next.finished() && next.plan().at(static_cast<size_t>(next.next_index())).kind != StageKind::Forward) {
    stages += (stages.empty() ? "" : ", ") + next.plan().at(static_cast<size_t>(next.next_index())).title;
    next.step();
  }
  const std::vector<double> now = buffer(last);
  r.lines.push_back("Iteration 2 before its forward ran: " + stages + ".");
  r.lines.push_back("Rank " + std::to_string(last) + "'s running_mean now: " + format_values(now) + " (rank 0's: " +
                    format_values(buffer(0)) + ").");
  const bool is_rank0 = gap(now, rank0) < 1e-7, is_own = gap(now, own) < 1e-7;
  r.answer_value = is_rank0 ? "rank0" : is_own ? "own" : "other";
  r.facts.push_back({"rank " + std::to_string(last) + " before forward 2", format_values(now)});
  return r;
}

ScenarioResult run_ddp_memory(const Params& p) {
  const int world = p.integer("devices"), batch = p.integer("batch");
  const ModelSpec spec = scenario_model(p, "mnist-mlp");
  check(!spec.layers.empty() && spec.layers.front().kind == LayerKind::Linear,
        "this scenario needs a model whose first layer is linear (it feeds rows of features)", ErrorClass::ValueError);
  const Shape shape = {batch, spec.layers.front().in_features};
  const Tensor x = make_input(shape, spec.dtype, 41);
  const Tensor t = make_targets(batch, model_classes(spec, shape), 41);
  const bool momentum = p.flag("momentum", true);
  TrainOptions dp_opt;
  DdpOptions ddp_opt;
  if (momentum) dp_opt.optimizer.momentum = ddp_opt.optimizer.momentum = 0.9;
  auto dp = run_iteration(world, spec, x, t, dp_opt);
  if (!dp->error.empty()) throw Error(dp->error);
  auto ddp = run_ddp(world, spec, x, t, ddp_opt);
  const auto dp_peak = peaks_of(dp->recorder, world), ddp_peak = peaks_of(ddp->recorder, world);
  ScenarioResult r;
  r.title = "Peak memory per device over one iteration: DataParallel and DDP on cpu:" + std::to_string(world) + ", batch " +
            std::to_string(batch) + (momentum ? ", SGD with momentum" : "");
  for (int d = 0; d < world; ++d)
    r.lines.push_back("Device " + std::to_string(d) + ": DataParallel " + kib(dp_peak[static_cast<size_t>(d)]) + ", DDP " +
                      kib(ddp_peak[static_cast<size_t>(d)]));
  const auto top = [](const std::vector<int64_t>& v) {
    return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
  };
  const auto flat = [](const std::vector<int64_t>& v) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return *hi > 0 && static_cast<double>(*hi - *lo) / static_cast<double>(*hi) < 0.05;
  };
  const std::string dp_answer = flat(dp_peak) ? "equal" : std::to_string(top(dp_peak));
  const std::string ddp_answer = flat(ddp_peak) ? "equal" : std::to_string(top(ddp_peak));
  r.lines.push_back("DataParallel: device " + std::to_string(top(dp_peak)) +
                    " peaks highest: it keeps the parameters, the optimizer state, the gathered output and the "
                    "summed gradients for everyone.");
  r.lines.push_back(ddp_answer == "equal"
                        ? "DDP: every rank holds the same things (a full model, its optimizer state, its shard's "
                          "activations and the gradient buckets), so the peaks are within 5% of each other."
                        : "DDP: device " + ddp_answer + " peaks highest.");
  const int64_t dp_top = *std::max_element(dp_peak.begin(), dp_peak.end());
  const int64_t ddp_top = *std::max_element(ddp_peak.begin(), ddp_peak.end());
  r.lines.push_back("Highest peak: DataParallel " + kib(dp_top) + ", DDP " + kib(ddp_top) +
                    (ddp_top >= dp_top ? ": DDP evens memory out, it does not shrink it (each rank also keeps its "
                                         "gradients twice, in .grad and in the buckets)."
                                       : "."));
  r.facts = {{"DataParallel peak device", dp_answer}, {"DDP peak device", ddp_answer}};
  r.answer_value = dp_answer + "|" + ddp_answer;
  return r;
}

ScenarioResult run_ddp_buckets(const Params& p) {
  const int world = p.integer("devices"), batch = p.integer("batch");
  const std::string ask = p.text("ask");
  const ModelSpec spec = p.j.contains("model") || p.j.contains("preset") ? scenario_model(p, "simple") : bucket_model();
  check(!spec.layers.empty() && spec.layers.front().kind == LayerKind::Linear,
        "this scenario needs a model whose first layer is linear (it feeds rows of features)", ErrorClass::ValueError);
  const Shape shape = {batch, spec.layers.front().in_features};
  const Tensor x = make_input(shape, spec.dtype, 43);
  const Tensor t = make_targets(batch, model_classes(spec, shape), 43);
  auto ddp = run_ddp(world, spec, x, t, DdpOptions{});
  const auto first = ddp->trainer->rank(0).reducer().bucket_names();
  ddp->recorder.events.clear();
  ddp->iteration = std::make_unique<DdpIteration>(*ddp->trainer, x, t, &ddp->recorder);
  ddp->iteration->run_to_end();
  const auto second = ddp->trainer->rank(0).reducer().bucket_names();
  ScenarioResult r;
  r.title = "DDP's gradient buckets over two iterations: " + Model(spec).describe_short() + " on cpu:" + std::to_string(world);
  const auto describe = [](const std::vector<std::vector<std::string>>& buckets) {
    std::string out;
    for (size_t b = 0; b < buckets.size(); ++b) {
      out += (b ? "; " : "") + std::string("bucket ") + std::to_string(b) + " [";
      for (size_t i = 0; i < buckets[b].size(); ++i) out += (i ? ", " : "") + buckets[b][i];
      out += "]";
    }
    return out;
  };
  r.lines.push_back("Iteration 1: " + std::to_string(first.size()) + " bucket(s): " + describe(first));
  r.lines.push_back("Iteration 2 (rebuilt in gradient-ready order, first bucket 1 MiB): " + std::to_string(second.size()) +
                    " bucket(s): " + describe(second));
  // When did each bucket of iteration 2 go out, against the backward stages?
  double backward0_start = -1;
  size_t allreduce_bytes = 0;
  std::vector<CommSpan> spans;
  bool constructs = false;
  for (const auto& e : ddp->recorder.events) {
    if (e.stage.kind == StageKind::Backward && e.stage.layer == 0) backward0_start = e.t_start;
    if (e.stage.kind == StageKind::Construct) constructs = true;
    for (const auto& c : e.comm)
      if (c.device == 0) spans.push_back(c), allreduce_bytes += c.bytes;
  }
  bool overlap = false;
  for (const auto& c : spans) {
    const bool early = c.t_launch < backward0_start;
    overlap = overlap || early;
    r.lines.push_back("Bucket " + std::to_string(c.bucket) + " (" + kib(static_cast<int64_t>(c.bytes)) + ") all-reduce launched at " +
                      ms(c.t_launch) + (early ? ", before Backward 0 began at " + ms(backward0_start)
                                                 : ", once Backward 0 (the last backward stage) had produced its gradients") +
                      ".");
  }
  r.facts = {{"buckets", std::to_string(first.size()) + " then " + std::to_string(second.size())},
             {"DDP all-reduce bytes per iteration (rank 0)", std::to_string(allreduce_bytes)}};
  if (ask == "counts") {
    r.answer_value = std::to_string(first.size()) + "," + std::to_string(second.size());
    return r;
  }
  // why_faster: DataParallel's second iteration on the same devices, for contrast.
  auto dp = run_iteration(world, spec, x, t, TrainOptions{});
  if (!dp->error.empty()) throw Error(dp->error);
  Recorder dp2;
  Iteration again(*dp->trainer, x, t, &dp2);
  again.run_to_end();
  size_t replicate_bytes = 0, dp_bytes = 0;
  bool replicates = false;
  for (const auto& e : dp2.events) {
    dp_bytes += e.bytes_moved;
    if (e.stage.kind == StageKind::Replicate) replicates = true, replicate_bytes += e.bytes_moved;
  }
  r.lines.push_back("DataParallel, iteration 2: Replicate copies the parameters again (" + kib(static_cast<int64_t>(replicate_bytes)) +
                    "), of " + kib(static_cast<int64_t>(dp_bytes)) + " moved in all, and everything waits for GPU 0.");
  r.lines.push_back(std::string("DDP, iteration 2: ") + (constructs ? "constructs again" : "no Construct stage (rank 0's state was broadcast once)") +
                    "; " + (overlap ? "bucket 0's all-reduce ran while the backward was still computing." : "no all-reduce overlapped the backward."));
  const bool once = replicates && !constructs;
  r.facts.push_back({"DataParallel replicate bytes per iteration", std::to_string(replicate_bytes)});
  r.answer_value = once && overlap ? "once+overlap" : overlap ? "overlap" : once ? "once" : "neither";
  return r;
}

}  // namespace dpv::course::detail
