#include "engine/netmodel/step_meter.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "engine/error.h"

namespace dpv::netmodel {

int layer_of_parameter(const std::string& name) {
  const size_t dot = name.find('.');
  if (dot == 0 || dot == std::string::npos || dot > 9) return -1;
  for (size_t i = 0; i < dot; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  }
  return std::stoi(name.substr(0, dot));
}

StepMeasure StepMeter::take(int world) {
  StepMeasure m;
  int layers = 0;
  double backward_start = -1;
  for (const StageEvent& e : events_) {
    m.step_s = std::max(m.step_s, e.t_end);
    if (e.stage.kind == StageKind::Forward) layers = std::max(layers, e.stage.layer + 1);
    if (e.stage.kind != StageKind::Backward) continue;
    backward_start = backward_start < 0 ? e.t_start : std::min(backward_start, e.t_start);
    m.backward_end_s = std::max(m.backward_end_s, e.t_end);
  }
  check(backward_start >= 0, "the step reported no backward stage: only a DDP iteration can be measured",
        ErrorClass::RuntimeError);
  m.facts.backward_s.assign(static_cast<size_t>(layers), 0.0);  // [L]
  double last_comm_end = 0;
  for (const StageEvent& e : events_) {
    if (e.stage.kind == StageKind::Backward && e.stage.layer >= 0 && e.stage.layer < layers)
      m.facts.backward_s[static_cast<size_t>(e.stage.layer)] += e.t_end - e.t_start;
    for (const CommSpan& span : e.comm) {
      if (span.device != 0) continue;
      MeasuredBucket b;
      // The model prices what crossed the link: a communication hook sends fewer bytes than the
      // bucket holds (fp16 half, PowerSGD its P and Q).
      b.buffer_bytes = span.bytes;
      b.sent_bytes = span.report.bytes;
      b.facts.bytes = link_bytes(b.buffer_bytes, b.sent_bytes);
      // The backward goes from the last layer to the first: the bucket is complete when its
      // lowest layer's gradients are.
      b.facts.ready_layer = layers - 1;
      for (const std::string& p : span.params) {
        const int layer = layer_of_parameter(p);
        if (layer >= 0) b.facts.ready_layer = std::min(b.facts.ready_layer, layer);
      }
      b.start = span.t_start;
      b.end = span.t_end;
      b.sent_bytes = span.report.bytes;
      m.bytes += span.bytes;
      m.sent_bytes += span.report.bytes;
      last_comm_end = std::max(last_comm_end, span.t_end);
      m.facts.buckets.push_back(b.facts);
      m.buckets.push_back(b);
    }
  }
  events_.clear();
  m.exposed_s = std::max(0.0, last_comm_end - m.backward_end_s);
  m.facts.forward_s = backward_start;
  m.facts.after_backward_s = std::max(0.0, m.step_s - m.backward_end_s - m.exposed_s);
  m.facts.world = world;
  m.facts.collective = CollectiveKind::AllReduce;
  return m;
}

}  // namespace dpv::netmodel
