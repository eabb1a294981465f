#include "engine/netmodel/lab_summary.h"

#include <algorithm>

#include "engine/error.h"

namespace dpv::netmodel {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

PointSummary summarize_point(const std::vector<StepMeasure>& steps, const Link& link) {
  PointSummary s;
  std::vector<const StepMeasure*> timed;
  for (const StepMeasure& m : steps) {
    if (timed_step(m))
      timed.push_back(&m);
    else
      s.hook_error = m.hook_error;
  }
  check(!timed.empty(), "no step was measured: give the training at least one step", ErrorClass::ValueError);
  const size_t first = std::min(kWarmupSteps, timed.size() - 1);
  std::vector<double> step, predicted, exposed, predicted_exposed, bytes, saved;
  for (size_t i = first; i < timed.size(); ++i) {
    const StepMeasure& m = *timed[i];
    const DdpStepPrediction p = predict_ddp_step(m.facts, link);
    const size_t sent = link_bytes(m.bytes, m.sent_bytes);
    step.push_back(m.step_s);
    exposed.push_back(m.exposed_s);
    bytes.push_back(static_cast<double>(sent));
    saved.push_back(sent < m.bytes ? static_cast<double>(m.bytes - sent) : 0.0);
    predicted.push_back(p.step_s);
    predicted_exposed.push_back(p.exposed_s);
  }
  s.steps_measured = step.size();
  s.step_s = median(step);
  s.predicted_step_s = median(predicted);
  s.exposed_s = median(exposed);
  s.predicted_exposed_s = median(predicted_exposed);
  s.bytes_per_step = median(bytes);
  s.saved_bytes_per_step = median(saved);
  s.ratio = s.predicted_step_s > 0 ? s.step_s / s.predicted_step_s : 0;
  return s;
}

}  // namespace dpv::netmodel
