// One device, DataParallel and DDP side by side (see ddp_compare.h).
#include "course/ddp_compare.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "engine/data_parallel.h"
#include "engine/ddp/ddp.h"
#include "engine/device.h"
#include "engine/dist/in_process_group.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/model_data.h"
#include "engine/step_timing.h"

namespace dpv::course {

namespace {

size_t ix(int i) { return static_cast<size_t>(i); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Keeps the events of one iteration; `snapshots` says whether the stages build value snapshots.
class EventLog final : public Observer {
 public:
  explicit EventLog(bool snapshots) : snapshots_(snapshots) {}
  void on_stage(const StageEvent& e) override { events.push_back(e); }
  bool wants_snapshots() const override { return snapshots_; }
  std::vector<StageEvent> events;

 private:
  bool snapshots_;
};

double span(const StageEvent& e) { return e.t_end - e.t_start; }

StepParts dp_parts(const std::vector<StageEvent>& events, double total) {
  StepParts p;
  p.total = total;
  for (const StageEvent& e : events) {
    switch (e.stage.kind) {
      case StageKind::Forward: case StageKind::Loss: case StageKind::Backward: case StageKind::Step:
      case StageKind::Sample:
        p.compute += span(e);
        break;
      case StageKind::Scatter: case StageKind::Gather: case StageKind::GradScatter: case StageKind::ReduceGrads:
      case StageKind::BroadcastBuffers: case StageKind::Finalize:
        p.communication += span(e);
        break;
      case StageKind::Replicate: case StageKind::Construct:
        p.replicate += span(e);
        break;
    }
  }
  return p;
}

// DataParallel: bytes_moved of each transfer stage (data sent to or from devices 1..R-1).
std::vector<BytesMoved> dp_bytes(const std::vector<StageEvent>& events) {
  std::vector<BytesMoved> out;
  auto add = [&](const std::string& what, double bytes) {
    for (auto& b : out)
      if (b.what == what) { b.bytes += bytes; return; }
    out.push_back({what, bytes});
  };
  for (const StageEvent& e : events) {
    switch (e.stage.kind) {
      case StageKind::Scatter: add("scatter inputs", static_cast<double>(e.bytes_moved)); break;
      case StageKind::Replicate: add("replicate parameters", static_cast<double>(e.bytes_moved)); break;
      case StageKind::Gather: add("gather outputs", static_cast<double>(e.bytes_moved)); break;
      case StageKind::GradScatter: add("scatter output grads", static_cast<double>(e.bytes_moved)); break;
      case StageKind::ReduceGrads: add("reduce grads to GPU 0", static_cast<double>(e.bytes_moved)); break;
      default: break;
    }
  }
  return out;
}

// DDP: what every rank sent. The buffers' broadcast sends the buffers to W-1 ranks; each bucket's
// ring sends the step bytes each rank reported (2(W-1)/W of the bucket per rank).
std::vector<BytesMoved> ddp_bytes(const std::vector<StageEvent>& events, int W) {
  double broadcast = 0, ring = 0;
  for (const StageEvent& e : events) {
    if (e.stage.kind == StageKind::BroadcastBuffers)
      for (const auto& r : e.collectives) broadcast += static_cast<double>(r.bytes) * (W - 1);
    for (const CommSpan& c : e.comm)
      for (const RingStep& st : c.ring) ring += static_cast<double>(st.bytes);
  }
  std::vector<BytesMoved> out;
  if (broadcast > 0) out.push_back({"broadcast buffers", broadcast});
  out.push_back({"all-reduce grads", ring});
  return out;
}

std::vector<std::string> param_names(const Model& model) {
  std::vector<std::string> names;
  for (const auto& d : model.parameter_decls()) names.push_back(d.name);
  return names;
}

void read_memory(DeviceSet& devices, ModeRun& run) {
  run.device_labels.clear();
  run.peak_memory.clear();
  for (int d = 0; d < devices.size(); ++d) {
    run.device_labels.push_back(devices[d].label());
    run.peak_memory.push_back(devices[d].memory().peak.load());
  }
}

// Per device: the snapshot of the stage boundary where its listed tensors took the most (what a
// stage boundary holds does not depend on thread timing; a collective's scratch caught in flight,
// `other`, does, so it is left out of the parts), and what lived only inside a stage: the device's
// peak counter over the logged iteration against those parts.
void read_peak_parts(const std::vector<StageEvent>& events, DeviceSet& devices, ModeRun& run) {
  const size_t n = static_cast<size_t>(devices.size());
  run.peak_parts.assign(n, MemoryBreakdown{});
  run.peak_stage.assign(n, std::string());
  run.stage_temporaries.assign(n, 0);
  for (const StageEvent& e : events)
    for (const DeviceState& d : e.devices) {
      const size_t i = ix(d.device);
      MemoryBreakdown listed = d.memory;
      listed.other = 0;
      if (i < n && (run.peak_stage[i].empty() || listed.total() > run.peak_parts[i].total())) {
        run.peak_parts[i] = listed;
        run.peak_stage[i] = e.stage.title;
      }
    }
  for (size_t i = 0; i < n; ++i)
    run.stage_temporaries[i] =
        std::max<int64_t>(0, devices[static_cast<int>(i)].memory().peak.load() - run.peak_parts[i].total());
}

// DataParallel and DDP from the same start: one iteration, then a second with stage snapshots
// (DDP's buckets are rebuilt before its second forward), on fresh devices so the peak counters
// belong to these two iterations alone.
void memory_by_kind(const CompareConfig& c, const ModelSpec& spec, const TensorMap& state, const Dataset& first,
                    const Dataset& second, CompareResult& out) {
  const std::string cpu = "cpu:" + std::to_string(c.world_size);
  {
    Trainer dp(DeviceSet::create(cpu), Model(spec), state, TrainOptions{c.lr, 0.0, 0.0, false});
    Iteration(dp, first.inputs, first.targets).run_to_end();
    EventLog log(true);
    Iteration(dp, second.inputs, second.targets, &log).run_to_end();
    read_peak_parts(log.events, dp.devices(), out.dp);
  }
  DdpOptions o;
  o.lr = c.lr;
  DdpTrainer ddp(DeviceSet::create(cpu), Model(spec), state, o);
  DdpIteration(ddp, first.inputs, first.targets).run_to_end();
  EventLog log(true);
  DdpIteration(ddp, second.inputs, second.targets, &log).run_to_end();
  read_peak_parts(log.events, ddp.devices(), out.ddp);
}

StepParts steady_parts(const std::vector<StepParts>& parts) {
  StepParts m;
  if (parts.empty()) return m;
  const size_t first = parts.size() > 1 ? 1 : 0;
  const double n = static_cast<double>(parts.size() - first);
  for (size_t i = first; i < parts.size(); ++i) {
    m.compute += parts[i].compute / n;
    m.communication += parts[i].communication / n;
    m.replicate += parts[i].replicate / n;
    m.total += parts[i].total / n;
    m.overlapped += parts[i].overlapped / n;
  }
  return m;
}

const TensorInfo* find_tensor(const DeviceState& d, const std::string& name) {
  for (const TensorInfo& t : d.tensors)
    if (t.name == name) return &t;
  return nullptr;
}

double first_value(const TensorMap& m, const std::string& name) {
  const auto v = m.at(name, "the gradients").to_doubles(1);
  return v.empty() ? std::nan("") : v[0];
}

// One iteration of each from the same start on the first batch: one gradient element.
SumVsMean sum_vs_mean(const CompareConfig& c, const ModelSpec& spec, const TensorMap& state, const Dataset& batch) {
  SumVsMean out;
  const std::string cpu = "cpu:" + std::to_string(c.world_size);
  const TrainOptions train{c.lr, 0.0, 0.0, false};
  DdpOptions ddp_options;
  ddp_options.lr = c.lr;
  DdpTrainer ddp(DeviceSet::create(cpu), Model(spec), state, ddp_options);
  for (int r = 0; r < c.world_size; ++r) record_ring_values(ddp.group(r), 1);
  EventLog ddp_log(false);
  DdpIteration(ddp, batch.inputs, batch.targets, &ddp_log).run_to_end();
  std::vector<const CommSpan*> bucket0(ix(c.world_size), nullptr);
  for (const StageEvent& e : ddp_log.events)
    for (const CommSpan& s : e.comm)
      if (s.bucket == 0 && s.device >= 0 && s.device < c.world_size) bucket0[ix(s.device)] = &s;
  for (int r = 0; r < c.world_size; ++r) {
    const CommSpan* s = bucket0[ix(r)];
    check(s && !s->ring.empty() && !s->ring.front().before.empty() && !s->params.empty(),
          "DDP's rank " + std::to_string(r) + " reported no recorded all-reduce of bucket 0");
    out.param = s->params.front();
    out.ddp_bucket.push_back(s->ring.front().before.front());
    if (r == 0) out.ddp_reduced = s->ring.back().after.front();
  }

  Trainer one(DeviceSet::create("cpu:1"), Model(spec), state, train);
  Iteration(one, batch.inputs, batch.targets).run_to_end();
  out.one_device = first_value(one.grads(), out.param);

  Trainer dp(DeviceSet::create(cpu), Model(spec), state, train);
  EventLog dp_log(true);
  Iteration(dp, batch.inputs, batch.targets, &dp_log).run_to_end();
  const StageEvent* last_backward = nullptr;
  for (const StageEvent& e : dp_log.events)
    if (e.stage.kind == StageKind::Backward) last_backward = &e;
  check(last_backward != nullptr, "DataParallel's iteration had no Backward stage");
  for (const DeviceState& d : last_backward->devices) {
    const TensorInfo* t = find_tensor(d, "grad " + out.param);
    if (t && !t->head.empty()) out.dp_replicas.push_back(t->head.front());
  }
  out.dp_reduced = first_value(dp.grads(), out.param);
  return out;
}

// The sweep's timing: one warm-up step (DDP: two, construction and the bucket rebuild), then the
// best of speedup_iters single steps (engine/step_timing.h, as `dpv bench`).
StepTiming sweep_timing(const CompareConfig& c) {
  StepTiming t;
  t.warmup = 1;
  t.rounds = c.speedup_iters;
  t.per_round = 1;
  return t;
}

double time_dp(const std::string& devices, const ModelSpec& spec, const TensorMap& state, const Dataset& data,
               const CompareConfig& c) {
  Trainer t(DeviceSet::create(devices), Model(spec), state, TrainOptions{c.lr, 0.0, 0.0, false});
  return time_dp_steps(t, data.inputs, data.targets, sweep_timing(c));
}

double time_ddp(const std::string& devices, const ModelSpec& spec, const TensorMap& state, const Dataset& data,
                const CompareConfig& c) {
  DdpOptions o;
  o.lr = c.lr;
  DdpTrainer t(DeviceSet::create(devices), Model(spec), state, o);
  return time_ddp_steps(t, data.inputs, data.targets, sweep_timing(c));
}

}  // namespace

double max_abs_difference(const TensorMap& a, const TensorMap& b, const std::vector<std::string>& names) {
  double worst = 0;
  for (const auto& name : names) {
    const Tensor* x = a.find(name);
    const Tensor* y = b.find(name);
    if (!x || !y || !x->defined() || !y->defined() || x->numel() != y->numel()) continue;
    const std::vector<double> xs = x->to_doubles(), ys = y->to_doubles();
    for (size_t i = 0; i < xs.size(); ++i) worst = std::max(worst, std::fabs(xs[i] - ys[i]));
  }
  return worst;
}

CompareResult run_comparison(const CompareConfig& c, const std::function<void(const std::string&, double)>& progress,
                             const std::function<bool()>& keep_going) {
  check(c.world_size >= 2 && c.world_size <= 8, "compare on 2 to 8 devices, got " + std::to_string(c.world_size), ErrorClass::ValueError);
  check(c.batch >= c.world_size, "the global batch (" + std::to_string(c.batch) + ") needs at least one sample per device (" +
                                     std::to_string(c.world_size) + ")", ErrorClass::ValueError);
  check(c.iterations >= 1, "compare at least one iteration", ErrorClass::ValueError);
  check(c.max_speedup_devices >= 0 && c.max_speedup_devices <= 8, "the speed-up sweep covers at most 8 devices", ErrorClass::ValueError);
  check(c.max_speedup_devices == 0 || c.speedup_iters >= 1, "the speed-up sweep times at least one step per point",
        ErrorClass::ValueError);
  auto say = [&](const std::string& what, double done) {
    if (progress) progress(what, done);
  };
  auto go_on = [&] { return !keep_going || keep_going(); };

  const ModelSpec spec = preset_model(c.preset);
  const Model model(spec);
  const TensorMap state = model.initial_state(c.seed);
  const std::vector<std::string> params = param_names(model);
  std::vector<Dataset> batches;
  for (int i = 0; i < c.iterations; ++i) batches.push_back(make_data_for_model(spec, c.batch, c.seed + 1 + static_cast<uint64_t>(i)));

  CompareResult out;
  out.config = c;
  out.hardware_threads = std::thread::hardware_concurrency();
  for (const LayerSpec& l : spec.layers) out.has_batchnorm = out.has_batchnorm || is_batchnorm(l.kind);
  out.one.name = "one device";
  out.dp.name = "DataParallel";
  out.ddp.name = "DDP";

  const std::string cpu = "cpu:" + std::to_string(c.world_size);
  const TrainOptions train{c.lr, 0.0, 0.0, false};
  DdpOptions ddp_options;
  ddp_options.lr = c.lr;
  Trainer one(DeviceSet::create("cpu:1"), Model(spec), state, train);
  Trainer dp(DeviceSet::create(cpu), Model(spec), state, train);
  DdpTrainer ddp(DeviceSet::create(cpu), Model(spec), state, ddp_options);

  // The three train in turn on each batch, so machine noise falls on all of them alike.
  for (int i = 0; i < c.iterations && go_on(); ++i) {
    say("iteration " + std::to_string(i + 1) + " of " + std::to_string(c.iterations), 0.7 * i / c.iterations);
    const Dataset& b = batches[ix(i)];
    {
      EventLog log(false);
      const auto t0 = std::chrono::steady_clock::now();
      Iteration it(one, b.inputs, b.targets, &log);
      it.run_to_end();
      out.one.parts.push_back(dp_parts(log.events, seconds_since(t0)));
      out.one.loss.push_back(it.loss());
      out.one.max_param_diff.push_back(0.0);
      out.one.bytes = dp_bytes(log.events);
      out.one.rows = it.chunks();
    }
    {
      EventLog log(false);
      const auto t0 = std::chrono::steady_clock::now();
      Iteration it(dp, b.inputs, b.targets, &log);
      it.run_to_end();
      out.dp.parts.push_back(dp_parts(log.events, seconds_since(t0)));
      out.dp.loss.push_back(it.loss());
      out.dp.bytes = dp_bytes(log.events);
      out.dp.rows = it.chunks();
    }
    out.dp.max_param_diff.push_back(max_abs_difference(dp.state(), one.state(), params));
    {
      EventLog log(false);
      const auto t0 = std::chrono::steady_clock::now();
      DdpIteration it(ddp, b.inputs, b.targets, &log);
      it.run_to_end();
      StepParts p = dp_parts(log.events, seconds_since(t0));
      for (const StageEvent& e : log.events)
        for (const CommSpan& s : e.comm)
          if (s.device == 0) p.overlapped += s.t_end - s.t_start;
      out.ddp.parts.push_back(p);
      out.ddp.loss.push_back(it.mean_loss());
      out.ddp.rank0_loss.push_back(ddp.rank(0).loss());
      out.ddp.bytes = ddp_bytes(log.events, c.world_size);
      out.ddp.rows.clear();
      int64_t rows = 0;
      for (const auto& shard : it.shards()) {
        out.ddp.rows.push_back(static_cast<int64_t>(shard.size()));
        rows += static_cast<int64_t>(shard.size());
      }
      out.ddp_padding = rows - c.batch;
    }
    out.ddp.max_param_diff.push_back(max_abs_difference(ddp.rank(0).params(), one.state(), params));
  }
  for (ModeRun* run : {&out.one, &out.dp, &out.ddp}) run->steady = steady_parts(run->parts);
  read_memory(one.devices(), out.one);
  read_memory(dp.devices(), out.dp);
  read_memory(ddp.devices(), out.ddp);

  if (go_on()) {
    say("memory by kind", 0.71);
    memory_by_kind(c, spec, state, batches.front(), batches[batches.size() > 1 ? 1 : 0], out);
  }
  if (go_on()) {
    say("sum versus mean", 0.72);
    out.sum_mean = sum_vs_mean(c, spec, state, batches.front());
  }
  for (int w = 1; w <= c.max_speedup_devices && go_on(); ++w) {
    say("speed-up on " + std::to_string(w) + " device" + (w > 1 ? "s" : ""), 0.75 + 0.25 * (w - 1) / c.max_speedup_devices);
    SpeedupPoint p;
    p.devices = w;
    const Dataset& b = batches.front();
    p.one_device_s = out.speedup.empty() ? time_dp("cpu:1", spec, state, b, c) : out.speedup.front().one_device_s;
    p.dp_s = w == 1 ? p.one_device_s : time_dp("cpu:" + std::to_string(w), spec, state, b, c);
    p.ddp_s = time_ddp("cpu:" + std::to_string(w), spec, state, b, c);
    p.dp_speedup = p.one_device_s / p.dp_s;
    p.ddp_speedup = p.one_device_s / p.ddp_s;
    out.speedup.push_back(p);
  }
  say("done", 1.0);
  return out;
}

}  // namespace dpv::course
