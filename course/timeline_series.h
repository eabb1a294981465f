#pragma once
// The Timeline page's measurement: several whole iterations of the same model and batch, under
// the strategy the run names (DataParallel or DDP, the Iteration page's mode), timed by the engine, summarised per stage and per device as median and spread (min..max),
// and the same iterations on one device for the speed-up. One iteration is one noisy sample; the
// median of several is what the learner should read. Also says whether the devices are threads
// sharing fewer CPU cores than there are devices (then their work cannot all run at once).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/datasets.h"
#include "engine/observer.h"
#include "engine/run/run_spec.h"

namespace dpv::course {

// The page's defaults: SimpleModel on four simulated devices.
RunSpec default_timeline_run();

struct TimelineConfig {
  // Devices, model, optimizer, BatchNorm mode, the seed of the model's initial state and the
  // strategy measured (run.strategy); the batch is measure_timeline's argument.
  RunSpec run = default_timeline_run();
  int iterations = 7;  // timed iterations, after one warm-up that is not counted
};

// Median and spread of one duration over the timed iterations (seconds).
struct Spread {
  double median = 0;
  double min = 0;
  double max = 0;
};
// Of `values` (any order); all zero when empty. An even count takes the mean of the middle two.
Spread spread_of(std::vector<double> values);

// One device's busy span inside a stage: when it began after the stage began, and how long it ran.
struct DeviceSpan {
  int device = 0;
  Spread offset;
  Spread busy;
};

struct TimedStage {
  Stage stage;                       // from the plan
  Spread span;                       // the stage, wall clock
  std::vector<DeviceSpan> devices;   // devices busy in this stage in every timed iteration
};

// One measured device as the engine names it (Device::display_name and Device::detail), the parts
// a page lays out, so no page takes a label such as "GPU 1 (simulated on CPU)" apart.
struct DeviceTitle {
  std::string name;        // "GPU 1"
  std::string detail;      // "simulated on CPU", the GPU's name, ...; empty for none
  bool simulated = false;  // a CPU device standing in for a GPU
};

struct TimelineSeries {
  TimelineConfig config;
  std::vector<DeviceTitle> device_titles;  // one per device of config.run.devices
  std::vector<TimedStage> stages;    // plan order
  std::vector<double> totals;        // per timed iteration: the stages' spans added up (seconds)
  Spread total;                      // of `totals`
  Spread one_device_total;           // the same model, state and batch on one device
  double speedup = 0;                // one_device_total.median / total.median
  // Simulated devices: the machine's own limit for device_count workers (course/machine_reference.h,
  // measured after the iterations) and the efficiency against it (speedup / machine_speedup); 0
  // on one device or GPUs.
  double machine_speedup = 0;
  double efficiency = 0;
  // The iteration whose total is the median: its events carry the collectives' bytes and bandwidth.
  std::vector<StageEvent> median_events;
  bool simulated = false;            // the devices are CPU threads (cpu:K)
  int device_count = 0;
  unsigned host_cores = 0;           // CPUs this process may run on
  unsigned free_cores = 0;           // of those, free for the engine's threads while it timed (engine/free_cores.h)
  unsigned cores_for_devices() const { return free_cores > 0 ? std::min(free_cores, host_cores) : host_cores; }
  // Simulated devices outnumber the free cores: at most that many of them compute at a time.
  bool threads_share_cores() const {
    return simulated && cores_for_devices() > 0 && static_cast<unsigned>(device_count) > cores_for_devices();
  }
  bool cores_taken() const { return free_cores > 0 && free_cores < host_cores; }  // other programs took some
};

// One iteration's events cut down to its measured work, for drawing one iteration. The engine's
// clocks start when the iteration object is made (for the app: when it is prepared, long before the
// learner's first step) and run on while the learner reads between steps; neither is work. Every
// time is moved so the first stage starts at 0 and stretches in which no stage ran and no bucket
// all-reduce was in flight are taken out. DDP's Construct stage (iteration 1 only: DDP's
// constructor, which runs once before training) is left out of the events and reported apart.
struct IterationWork {
  std::vector<StageEvent> events;  // the iteration's stages without Construct, on the work clock
  double seconds = 0;              // the last stage's or all-reduce's end on that clock
  double construct_seconds = 0;    // DDP's Construct stage (0 when the iteration has none)
  double idle_seconds = 0;         // the time taken out
};
IterationWork measured_work(const std::vector<StageEvent>& events);

// CPUs this process may run on (its affinity mask; std::thread::hardware_concurrency otherwise).
unsigned host_cpu_count();

// Runs config.iterations + 1 iterations of config.run (its devices and strategy) and as many on one
// device (cpu:1, or the first GPU of a cuda spec), each from the same initial state and on `batch`;
// the first of each is a warm-up (under DDP it also constructs DDP) and is not counted. `keep_going` is
// asked between iterations; when it says stop, what finished is summarised. Throws dpv::Error on
// bad settings or a failing iteration (with the engine's message).
TimelineSeries measure_timeline(const TimelineConfig& config, const Dataset& batch,
                                const std::function<bool()>& keep_going = {});

}  // namespace dpv::course
