#pragma once
// One point of a network lab (a link and a bucket cap): the measured steps put beside the cost
// model's prediction for the same steps. The first steps are left out (DDP's construction
// collectives and the one bucket rebuild make them unlike the rest); of the others the median
// counts, since on a shared machine noise only ever adds time. A step that probed the hook's
// gradient error (StepMeasure::hook_error, an extra all-reduce) is never timed: it gives only
// the summary's hook_error.
#include <cstddef>
#include <optional>
#include <vector>

#include "engine/netmodel/step_meter.h"

namespace dpv::netmodel {

// Steps left out at the start: iteration 1 runs with one bucket before the rebuild; 2 is the first
// with the rebuilt buckets, whose buffers are new.
inline constexpr size_t kWarmupSteps = 2;

struct PointSummary {
  size_t steps_measured = 0;       // after the warm-up, probed steps not counted
  double step_s = 0;               // medians over the measured steps
  double predicted_step_s = 0;
  double exposed_s = 0;
  double predicted_exposed_s = 0;
  double bytes_per_step = 0;      // what the collectives sent (a hook's own bytes)
  double saved_bytes_per_step = 0;  // the buckets' float32 bytes less what was sent (a hook's saving)
  double ratio = 0;                // step_s / predicted_step_s (measured over predicted)
  std::optional<HookErrorMeasure> hook_error;  // the last probed step's, if any
};

// Whether `step` is timed: not a hook error probe.
inline bool timed_step(const StepMeasure& step) { return !step.hook_error.has_value(); }

// The summary of `steps` (every step of the run, the first timed ones the warm-up: at least one
// timed step is always measured) on `link`. Throws dpv::Error (ValueError) for no timed step.
PointSummary summarize_point(const std::vector<StepMeasure>& steps, const Link& link);

// The median of `values` (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> values);

}  // namespace dpv::netmodel
