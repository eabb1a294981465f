// Several timed DataParallel iterations, summarised (see timeline_series.h).
#include "course/timeline_series.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "engine/data_parallel.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/model_spec.h"

#ifdef __linux__
#include <sched.h>
#endif

namespace dpv::course {

namespace {

size_t ix(int i) { return static_cast<size_t>(i); }

// One device of the same kind: cpu:1, or the first GPU the spec lists.
std::string one_device_spec(const DeviceSpec& spec) {
  if (spec.kind == DeviceKind::Cpu) return "cpu:1";
  return "cuda:" + std::to_string(spec.gpus.empty() ? 0 : spec.gpus.front());
}

// The events of each timed iteration (after one warm-up) on `devices`; `titles`, when given,
// receives the devices' names and details.
std::vector<std::vector<StageEvent>> run_iterations(const std::string& devices, const ModelSpec& spec, const TensorMap& state,
                                                    const TrainOptions& options, const Dataset& batch, int timed,
                                                    const std::function<bool()>& keep_going,
                                                    std::vector<DeviceTitle>* titles = nullptr) {
  Trainer trainer(DeviceSet::create(devices), Model(spec), state, options);
  if (titles) {
    const DeviceSet& set = trainer.devices();
    for (int d = 0; d < set.size(); ++d)
      titles->push_back(DeviceTitle{set[d].display_name(), set[d].detail(), set[d].kind() == DeviceKind::Cpu});
  }
  std::vector<std::vector<StageEvent>> runs;
  for (int i = 0; i <= timed; ++i) {
    if (i > 0 && keep_going && !keep_going()) break;
    Iteration iteration(trainer, batch.inputs, batch.targets);
    // Snapshots carry the devices' busy spans; they are built after each stage's clock stopped.
    iteration.set_snapshots(true);
    std::vector<StageEvent> events;
    while (!iteration.finished()) events.push_back(iteration.step());
    if (i > 0) runs.push_back(std::move(events));  // the first one warms caches and threads up
  }
  return runs;
}

double total_of(const std::vector<StageEvent>& events) {
  double total = 0;
  for (const StageEvent& e : events) total += e.t_end - e.t_start;
  return total;
}

}  // namespace

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

unsigned host_cpu_count() {
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<unsigned>(n);
  }
#endif
  return std::thread::hardware_concurrency();
}

TimelineSeries measure_timeline(const TimelineConfig& c, const Dataset& batch, const std::function<bool()>& keep_going) {
  check(c.iterations >= 1 && c.iterations <= 101, "time 1 to 101 iterations, got " + std::to_string(c.iterations), ErrorClass::ValueError);
  const DeviceSpec devices = parse_device_spec(c.run.devices);
  const ModelSpec spec = c.run.model_spec();
  const TensorMap state = Model(spec).initial_state(c.run.seed);
  const TrainOptions options = train_options(c.run);

  TimelineSeries out;
  out.config = c;
  out.simulated = devices.kind == DeviceKind::Cpu;
  out.device_count = devices.count;
  out.host_cores = host_cpu_count();

  std::vector<DeviceTitle> titles;
  const auto runs = run_iterations(c.run.devices, spec, state, options, batch, c.iterations, keep_going, &titles);
  if (runs.empty()) return out;  // stopped before a timed iteration: nothing measured, no device rows
  out.device_titles = std::move(titles);
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
    std::vector<double> one;
    for (const auto& events : run_iterations(one_device_spec(devices), spec, state, options, batch, c.iterations, keep_going))
      one.push_back(total_of(events));
    out.one_device_total = spread_of(one);
  }
  if (out.total.median > 0 && out.one_device_total.median > 0) out.speedup = out.one_device_total.median / out.total.median;
  return out;
}

}  // namespace dpv::course
