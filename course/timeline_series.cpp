// Several timed iterations of one strategy, summarised (see timeline_series.h).
#include "course/machine_reference.h"
#include "course/timeline_series.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "engine/data_parallel.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/free_cores.h"
#include "engine/model.h"
#include "engine/model_spec.h"
#include "engine/strategy.h"

namespace dpv::course {

namespace {

size_t ix(int i) { return static_cast<size_t>(i); }

// One device of the same kind: cpu:1, or the first GPU the spec lists.
std::string one_device_spec(const DeviceSpec& spec) {
  if (spec.kind == DeviceKind::Cpu) return "cpu:1";
  return "cuda:" + std::to_string(spec.gpus.empty() ? 0 : spec.gpus.front());
}

// The events of each timed iteration (after one warm-up) of `run` on its devices; `titles`, when
// given, receives the devices' names and details.
std::vector<std::vector<StageEvent>> run_iterations(const RunSpec& run, const TensorMap& state, const Dataset& batch,
                                                    int timed, const std::function<bool()>& keep_going,
                                                    std::vector<DeviceTitle>* titles = nullptr) {
  const std::unique_ptr<Strategy> strategy = make_strategy(run, DeviceSet::create(run.devices), &state);
  if (titles) {
    const DeviceSet& set = strategy->devices();
    for (int d = 0; d < set.size(); ++d)
      titles->push_back(DeviceTitle{set[d].display_name(), set[d].detail(), set[d].kind() == DeviceKind::Cpu});
  }
  std::vector<std::vector<StageEvent>> runs;
  for (int i = 0; i <= timed; ++i) {
    if (i > 0 && keep_going && !keep_going()) break;
    const std::unique_ptr<StrategyIteration> iteration = strategy->begin_iteration(batch.inputs, batch.targets);
    // Snapshots carry the devices' busy spans; they are built after each stage's clock stopped.
    iteration->set_snapshots(true);
    std::vector<StageEvent> events;
    while (!iteration->finished()) events.push_back(iteration->step());
    if (i > 0) runs.push_back(std::move(events));  // the first one warms caches and threads up
  }
  return runs;
}

// [start, end] intervals merged into disjoint ones, in order.
std::vector<std::pair<double, double>> merged(std::vector<std::pair<double, double>> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<std::pair<double, double>> out;
  for (const auto& s : spans) {
    if (!out.empty() && s.first <= out.back().second) out.back().second = std::max(out.back().second, s.second);
    else out.push_back(s);
  }
  return out;
}

double total_of(const std::vector<StageEvent>& events) {
  double total = 0;
  for (const StageEvent& e : events) total += e.t_end - e.t_start;
  return total;
}

}  // namespace

IterationWork measured_work(const std::vector<StageEvent>& events) {
  IterationWork out;
  std::vector<std::pair<double, double>> work;
  for (const StageEvent& e : events) {
    if (e.stage.kind == StageKind::Construct) {
      out.construct_seconds += e.t_end - e.t_start;
      continue;
    }
    out.events.push_back(e);
    work.push_back({e.t_start, e.t_end});
    for (const DeviceState& d : e.devices)
      if (d.busy_end > d.busy_start) work.push_back({d.busy_start, d.busy_end});
    for (const CommSpan& c : e.comm) work.push_back({c.t_start, c.t_end});
  }
  const auto spans = merged(std::move(work));
  // A time on the engine's clock to the work clock: less the idle time before it; a time inside
  // an idle stretch goes to that stretch's start.
  auto on_work_clock = [&spans](double t) {
    double idle = 0, last_end = 0;
    for (const auto& [start, end] : spans) {
      if (t < start) return last_end - idle;  // inside the idle stretch before this span
      idle += start - last_end;
      if (t <= end) return t - idle;
      last_end = end;
    }
    return last_end - idle;
  };
  double last_end = 0;
  for (const auto& [start, end] : spans) {
    out.idle_seconds += start - last_end;
    last_end = end;
  }
  out.seconds = last_end - out.idle_seconds;
  for (StageEvent& e : out.events) {
    e.t_start = on_work_clock(e.t_start);
    e.t_end = on_work_clock(e.t_end);
    for (DeviceState& d : e.devices) {
      d.busy_start = on_work_clock(d.busy_start);
      d.busy_end = on_work_clock(d.busy_end);
    }
    for (CommSpan& c : e.comm) {
      c.t_launch = on_work_clock(c.t_launch);
      c.t_start = on_work_clock(c.t_start);
      c.t_end = on_work_clock(c.t_end);
    }
  }
  return out;
}

RunSpec default_timeline_run() {
  RunSpec run;
  run.devices = "cpu:4";
  run.preset = "simple";
  return run;
}

Spread spread_of(std::vector<double> values) {
  Spread s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  s.min = values.front();
  s.max = values.back();
  s.median = n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  return s;
}

unsigned host_cpu_count() { return FreeCores::read_machine().usable; }

TimelineSeries measure_timeline(const TimelineConfig& c, const Dataset& batch, const std::function<bool()>& keep_going) {
  check(c.iterations >= 1 && c.iterations <= 101, "time 1 to 101 iterations, got " + std::to_string(c.iterations), ErrorClass::ValueError);
  const DeviceSpec devices = parse_device_spec(c.run.devices);
  const ModelSpec spec = c.run.model_spec();
  const TensorMap state = Model(spec).initial_state(c.run.seed);

  TimelineSeries out;
  out.config = c;
  out.simulated = devices.kind == DeviceKind::Cpu;
  out.device_count = devices.count;
  out.host_cores = host_cpu_count();

  std::vector<DeviceTitle> titles;
  FreeCores::sample_now();  // the free cores below are those of the iterations, from here to their end
  const auto runs = run_iterations(c.run, state, batch, c.iterations, keep_going, &titles);
  if (runs.empty()) return out;  // stopped before a timed iteration: nothing measured, no device rows
  out.device_titles = std::move(titles);
  out.free_cores = FreeCores::sample_now().free_cores();
  for (const auto& events : runs) out.totals.push_back(total_of(events));
  out.total = spread_of(out.totals);

  // Per stage (the plan is the same every iteration) and per device busy in it.
  const std::vector<StageEvent>& first = runs.front();
  for (size_t s = 0; s < first.size(); ++s) {
    TimedStage stage;
    stage.stage = first[s].stage;
    std::vector<double> spans;
    for (const auto& events : runs) spans.push_back(events[s].t_end - events[s].t_start);
    stage.span = spread_of(spans);
    for (const DeviceState& d : first[s].devices) {
      std::vector<double> offsets, busy;
      for (const auto& events : runs) {
        const StageEvent& e = events[s];
        if (ix(d.device) >= e.devices.size()) continue;
        const DeviceState& x = e.devices[ix(d.device)];
        if (x.busy_end <= x.busy_start) continue;  // idle in this iteration
        offsets.push_back(x.busy_start - e.t_start);
        busy.push_back(x.busy_end - x.busy_start);
      }
      if (busy.size() != runs.size()) continue;  // idle in some iteration: not a bar of this stage
      stage.devices.push_back(DeviceSpan{d.device, spread_of(offsets), spread_of(busy)});
    }
    out.stages.push_back(std::move(stage));
  }
  // The iteration nearest the median total.
  size_t median_run = 0;
  for (size_t i = 1; i < runs.size(); ++i)
    if (std::abs(out.totals[i] - out.total.median) < std::abs(out.totals[median_run] - out.total.median)) median_run = i;
  out.median_events = runs[median_run];

  if (keep_going && !keep_going()) return out;
  if (devices.count == 1) {
    out.one_device_total = out.total;
  } else {
    RunSpec one_device = c.run;
    one_device.devices = one_device_spec(devices);
    std::vector<double> one;
    for (const auto& events : run_iterations(one_device, state, batch, c.iterations, keep_going))
      one.push_back(total_of(events));
    out.one_device_total = spread_of(one);
  }
  if (out.total.median > 0 && out.one_device_total.median > 0) out.speedup = out.one_device_total.median / out.total.median;
  if (out.simulated && devices.count > 1 && out.speedup > 0 && (!keep_going || keep_going())) {
    out.machine_speedup = measure_machine_reference(devices.count, machine_reference_shapes(), 0.1).speedup();
    if (out.machine_speedup > 0) out.efficiency = out.speedup / out.machine_speedup;
  }
  return out;
}

}  // namespace dpv::course
