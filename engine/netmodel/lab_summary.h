#pragma once
// One point of a network lab (a link and a bucket cap): the measured steps put beside the cost
// model's prediction for the same steps. The first steps are left out (DDP's construction
// collectives and the one bucket rebuild make them unlike the rest); of the others the median
// counts, since on a shared machine noise only ever adds time.
#include <cstddef>
#include <vector>

#include "engine/netmodel/step_meter.h"

namespace dpv::netmodel {

// Steps left out at the start: iteration 1 runs with one bucket before the rebuild; 2 is the first
// with the rebuilt buckets, whose buffers are new.
inline constexpr size_t kWarmupSteps = 2;

struct PointSummary {
  size_t steps_measured = 0;       // after the warm-up
  double step_s = 0;               // medians over the measured steps
  double predicted_step_s = 0;
  double exposed_s = 0;
  double predicted_exposed_s = 0;
  double bytes_per_step = 0;      // what the collectives sent (a hook's own bytes)
  double ratio = 0;                // step_s / predicted_step_s (measured over predicted)
};

// The summary of `steps` (every step of the run, the first ones the warm-up: at least one step is
// always measured) on `link`. Throws dpv::Error (ValueError) for no steps.
PointSummary summarize_point(const std::vector<StepMeasure>& steps, const Link& link);

// The median of `values` (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> values);

}  // namespace dpv::netmodel
