// One device, DataParallel and DDP side by side (see ddp_compare.h).
#include "course/ddp_compare.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>

#include "course/machine_reference.h"
#include "course/tensor_difference.h"
#include "engine/data_parallel.h"
#include "engine/ddp/ddp.h"
#include "engine/device.h"
#include "engine/process_groups/in_process_group.h"
#include "engine/error.h"
#include "engine/free_cores.h"
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

// The iteration's stages by kind; DDP's bucket all-reduces on rank 0 as `overlapped` (DataParallel's
// events carry none).
StepParts step_parts(const std::vector<StageEvent>& events, double total) {
  StepParts p;
  p.total = total;
  for (const StageEvent& e : events) {
    for (const CommSpan& s : e.comm)
      if (s.device == 0) p.overlapped += s.t_end - s.t_start;
    switch (e.stage.kind) {
      case StageKind::Forward: case StageKind::Loss: case StageKind::Backward: case StageKind::Step:
      case StageKind::Sample: case StageKind::FreeParams:
        p.compute += span(e);
        break;
      case StageKind::Scatter: case StageKind::Gather: case StageKind::GradScatter: case StageKind::ReduceGrads:
      case StageKind::BroadcastBuffers: case StageKind::Finalize: case StageKind::GatherParams:
      case StageKind::ReduceScatter: case StageKind::BroadcastParams:
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

// DDP: what every rank sent. The buffers' broadcast sends the buffers to world-1 ranks; each bucket's
// ring sends the step bytes each rank reported (2(world-1)/world of the bucket per rank).
std::vector<BytesMoved> ddp_bytes(const std::vector<StageEvent>& events, int world) {
  double broadcast = 0, ring = 0;
  for (const StageEvent& e : events) {
    if (e.stage.kind == StageKind::BroadcastBuffers)
      for (const auto& r : e.collectives) broadcast += static_cast<double>(r.bytes) * (world - 1);
    for (const CommSpan& c : e.comm)
      for (const RingStep& st : c.ring) ring += static_cast<double>(st.bytes);
  }
  std::vector<BytesMoved> out;
  if (broadcast > 0) out.push_back({"broadcast buffers", broadcast});
  out.push_back({"all-reduce grads", ring});
  return out;
}

// What each strategy's transfers are: DataParallel's stages move data to and from device 0, DDP's
// ranks broadcast buffers and all-reduce buckets.
std::vector<BytesMoved> bytes_moved(StrategyKind kind, const std::vector<StageEvent>& events, int world) {
  return runs_ranks(kind) ? ddp_bytes(events, world) : dp_bytes(events);
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
void memory_by_kind(const std::array<std::pair<RunSpec, ModeRun*>, 2>& modes, const TensorMap& state,
                    const Dataset& first, const Dataset& second) {
  for (const auto& [spec, run] : modes) {
    const std::unique_ptr<Strategy> strategy = make_strategy(spec, DeviceSet::create(spec.devices), &state);
    strategy->begin_iteration(first.inputs, first.targets)->run_to_end();
    EventLog log(true);
    strategy->begin_iteration(second.inputs, second.targets, &log)->run_to_end();
    read_peak_parts(log.events, strategy->devices(), *run);
  }
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

// The three runs of the comparison, from its one description: what differs is the strategy and
// the devices (one device: cpu:1).
struct Modes {
  RunSpec one, dp, ddp;
};

RunSpec with_strategy(RunSpec spec, StrategyKind kind, const std::string& devices) {
  spec.strategy = kind;
  spec.devices = devices;
  return spec;
}

Modes compare_modes(const CompareConfig& c) {
  return {with_strategy(c.run, StrategyKind::DataParallel, "cpu:1"),
          with_strategy(c.run, StrategyKind::DataParallel, c.run.devices),
          with_strategy(c.run, StrategyKind::DistributedDataParallel, c.run.devices)};
}

// One iteration of each from the same start on the first batch: one gradient element. What each
// strategy is asked to describe differs: DDP's recorded ring values of bucket 0, DataParallel's
// replicas' gradients in its Backward snapshot and device 0's reduced one.
SumVsMean sum_vs_mean(const Modes& modes, int world, const TensorMap& state, const Dataset& batch) {
  SumVsMean out;
  DdpTrainer ddp(DeviceSet::create(modes.ddp.devices), Model(modes.ddp.model_spec()), state, ddp_options(modes.ddp));
  for (int r = 0; r < world; ++r) record_ring_values(ddp.group(r), 1);
  EventLog ddp_log(false);
  DdpIteration(ddp, batch.inputs, batch.targets, &ddp_log).run_to_end();
  std::vector<const CommSpan*> bucket0(ix(world), nullptr);
  for (const StageEvent& e : ddp_log.events)
    for (const CommSpan& s : e.comm)
      if (s.bucket == 0 && s.device >= 0 && s.device < world) bucket0[ix(s.device)] = &s;
  for (int r = 0; r < world; ++r) {
    const CommSpan* s = bucket0[ix(r)];
    check(s && !s->ring.empty() && !s->ring.front().before.empty() && !s->params.empty(),
          "DDP's rank " + std::to_string(r) + " reported no recorded all-reduce of bucket 0");
    out.param = s->params.front();
    out.ddp_bucket.push_back(s->ring.front().before.front());
    if (r == 0) out.ddp_reduced = s->ring.back().after.front();
  }

  Trainer one(DeviceSet::create(modes.one.devices), Model(modes.one.model_spec()), state, train_options(modes.one));
  Iteration(one, batch.inputs, batch.targets).run_to_end();
  out.one_device = first_value(one.grads(), out.param);

  Trainer dp(DeviceSet::create(modes.dp.devices), Model(modes.dp.model_spec()), state, train_options(modes.dp));
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

// The sweep's seconds per step of `spec` on fresh devices: one warm-up step (DDP: two,
// construction and the bucket rebuild), then the best of speedup_iters single steps
// (engine/step_timing.h, as `dpv bench`, which times each strategy its own way).
double time_steps(const RunSpec& spec, const TensorMap& state, const Dataset& data, const CompareConfig& c) {
  StepTiming timing;
  timing.warmup = 1;
  timing.rounds = c.speedup_iters;
  timing.per_round = 1;
  const std::unique_ptr<Strategy> strategy = make_strategy(spec, DeviceSet::create(spec.devices), &state);
  if (auto* ddp = dynamic_cast<DdpTrainer*>(strategy.get()))
    return time_ddp_steps(*ddp, data.inputs, data.targets, timing);
  return time_dp_steps(dynamic_cast<Trainer&>(*strategy), data.inputs, data.targets, timing);
}

// One iteration of `strategy` on batch `b` into `run`: its stages' times, its loss (DDP: the mean
// of the ranks'; rank 0's own beside it), its transfers and the rows per device.
void record_iteration(Strategy& strategy, const Dataset& b, int world, ModeRun& run) {
  EventLog log(false);
  const auto t0 = std::chrono::steady_clock::now();
  const std::unique_ptr<StrategyIteration> it = strategy.begin_iteration(b.inputs, b.targets, &log);
  it->run_to_end();
  run.parts.push_back(step_parts(log.events, seconds_since(t0)));
  run.loss.push_back(it->mean_rank_loss());
  if (runs_ranks(strategy.kind())) run.rank0_loss.push_back(it->loss());
  run.bytes = bytes_moved(strategy.kind(), log.events, world);
  // DataParallel's chunks, DDP's sampler shards: every stage's event carries them.
  run.rows = log.events.empty() ? std::vector<int64_t>{} : log.events.back().chunk_sizes;
}

void check_config(const CompareConfig& c, const DeviceSpec& devices) {
  check(devices.kind == DeviceKind::Cpu, "the comparison runs on simulated CPU devices (cpu:W), got " + c.run.devices,
        ErrorClass::ValueError);
  const int world = devices.count;
  check(world >= 2 && world <= 8, "compare on 2 to 8 devices, got " + std::to_string(world), ErrorClass::ValueError);
  check(c.run.batch >= world, "the global batch (" + std::to_string(c.run.batch) + ") needs at least one sample per device (" +
                              std::to_string(world) + ")", ErrorClass::ValueError);
  check(c.iterations >= 1, "compare at least one iteration", ErrorClass::ValueError);
  check(c.max_speedup_devices >= 0 && c.max_speedup_devices <= 8, "the speed-up sweep covers at most 8 devices", ErrorClass::ValueError);
  check(c.max_speedup_devices == 0 || c.speedup_iters >= 1, "the speed-up sweep times at least one step per point",
        ErrorClass::ValueError);
}

}  // namespace

RunSpec compare_run_defaults() {
  RunSpec run;
  run.preset = "mlp-bn";
  run.devices = "cpu:4";
  run.batch = 64;
  run.optimizer.lr = 0.05;
  run.seed = 0;
  return run;
}

int compare_world_size(const CompareConfig& config) { return parse_device_spec(config.run.devices).count; }

CompareResult run_comparison(const CompareConfig& c, const std::function<void(const std::string&, double)>& progress,
                             const std::function<bool()>& keep_going, const std::atomic<int64_t>* live_batch) {
  const DeviceSpec devices = parse_device_spec(c.run.devices);
  check_config(c, devices);
  const int world = devices.count;
  auto say = [&](const std::string& what, double done) {
    if (progress) progress(what, done);
  };
  auto go_on = [&] { return !keep_going || keep_going(); };

  const ModelSpec spec = c.run.model_spec();
  const Model model(spec);
  const TensorMap state = model.initial_state(c.run.seed);
  const std::vector<std::string> params = param_names(model);
  CompareResult out;
  out.first_batch_seed = c.run.seed + 1;
  std::vector<Dataset> batches;  // drawn one per iteration, at the batch size asked for then

  out.config = c;
  out.hardware_threads = std::thread::hardware_concurrency();
  out.simulated = devices.kind == DeviceKind::Cpu;
  out.most_devices = std::max(world, c.max_speedup_devices);
  for (const LayerSpec& l : spec.layers) out.has_batchnorm = out.has_batchnorm || is_batchnorm(l.kind);
  out.one.name = "one device";
  out.dp.name = "DataParallel";
  out.ddp.name = "DDP";

  const Modes modes = compare_modes(c);
  const std::array<std::pair<RunSpec, ModeRun*>, 3> runs = {{{modes.one, &out.one}, {modes.dp, &out.dp}, {modes.ddp, &out.ddp}}};
  std::array<std::unique_ptr<Strategy>, 3> strategies;
  for (size_t m = 0; m < runs.size(); ++m)
    strategies[m] = make_strategy(runs[m].first, DeviceSet::create(runs[m].first.devices), &state);

  // The three train in turn on each batch, so machine noise falls on all of them alike; each is
  // measured against one device's parameters after the step (one device against itself: 0).
  const TensorMap& one_params = *strategies[0]->tensors().params;
  FreeCores::sample_now();  // the free cores after the iterations are those of the iterations
  for (int i = 0; i < c.iterations && go_on(); ++i) {
    // A batch the learner changed while the comparison trains applies from this iteration on (one
    // sample per device at least, as check_config asks of the first).
    const int64_t asked = live_batch ? live_batch->load() : c.run.batch;
    const int64_t rows = asked >= world ? asked : (out.batch_sizes.empty() ? c.run.batch : out.batch_sizes.back());
    batches.push_back(make_data_for_model(spec, rows, out.first_batch_seed + static_cast<uint64_t>(i)));
    out.batch_sizes.push_back(rows);
    out.batches = i + 1;
    say("iteration " + std::to_string(i + 1) + " of " + std::to_string(c.iterations), 0.7 * i / c.iterations);
    for (size_t m = 0; m < runs.size(); ++m) {
      ModeRun& run = *runs[m].second;
      record_iteration(*strategies[m], batches[ix(i)], world, run);
      run.max_param_diff.push_back(max_abs_difference(*strategies[m]->tensors().params, one_params, params).value_or(0.0));
    }
  }
  out.free_cores = FreeCores::sample_now().free_cores();
  if (!out.one.loss.empty()) {
    out.loss_low = *std::min_element(out.one.loss.begin(), out.one.loss.end());
    out.loss_high = *std::max_element(out.one.loss.begin(), out.one.loss.end());
  }
  if (!out.ddp.rows.empty())
    out.ddp_padding = std::accumulate(out.ddp.rows.begin(), out.ddp.rows.end(), int64_t{0}) - out.batch_sizes.back();
  for (size_t m = 0; m < runs.size(); ++m) {
    runs[m].second->steady = steady_parts(runs[m].second->parts);
    read_memory(strategies[m]->devices(), *runs[m].second);
  }

  if (batches.empty()) return out;  // stopped before the first iteration
  if (go_on()) {
    say("memory by kind", 0.71);
    memory_by_kind({{{modes.dp, &out.dp}, {modes.ddp, &out.ddp}}}, state, batches.front(), batches[batches.size() > 1 ? 1 : 0]);
  }
  if (go_on()) {
    say("sum versus mean", 0.72);
    out.sum_mean = sum_vs_mean(modes, world, state, batches.front());
  }
  for (int w = 1; w <= c.max_speedup_devices && go_on(); ++w) {
    say("speed-up on " + std::to_string(w) + " device" + (w > 1 ? "s" : ""), 0.75 + 0.25 * (w - 1) / c.max_speedup_devices);
    const std::string cpu = "cpu:" + std::to_string(w);
    SpeedupPoint p;
    p.devices = w;
    const Dataset& b = batches.front();
    FreeCores::sample_now();  // the free cores of this point's timed runs
    p.one_device_s = out.speedup.empty() ? time_steps(modes.one, state, b, c) : out.speedup.front().one_device_s;
    p.dp_s = w == 1 ? p.one_device_s : time_steps(with_strategy(c.run, StrategyKind::DataParallel, cpu), state, b, c);
    p.ddp_s = time_steps(with_strategy(c.run, StrategyKind::DistributedDataParallel, cpu), state, b, c);
    p.dp_speedup = p.one_device_s / p.dp_s;
    p.ddp_speedup = p.one_device_s / p.ddp_s;
    p.free_cores = FreeCores::sample_now().free_cores();
    out.free_cores = std::min(out.free_cores, p.free_cores);
    if (w > 1) {
      p.machine_speedup = measure_machine_reference(w, machine_reference_shapes(), 0.1).speedup();
      if (p.machine_speedup > 0) {
        p.dp_efficiency = p.dp_speedup / p.machine_speedup;
        p.ddp_efficiency = p.ddp_speedup / p.machine_speedup;
      }
    }
    out.speedup.push_back(p);
  }
  say("done", 1.0);
  return out;
}

}  // namespace dpv::course
