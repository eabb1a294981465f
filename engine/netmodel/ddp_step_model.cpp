#include "engine/netmodel/ddp_step_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/error.h"

namespace dpv::netmodel {
namespace {

void check_time(double seconds, const std::string& what) {
  check(seconds >= 0 && std::isfinite(seconds), what + " must be a time of 0 seconds or more, got " +
                                                    std::to_string(seconds), ErrorClass::ValueError);
}

}  // namespace

DdpStepPrediction predict_ddp_step(const DdpStepFacts& facts, const Link& link) {
  check_time(facts.forward_s, "the forward");
  check_time(facts.after_backward_s, "the time after the backward");
  const int layers = static_cast<int>(facts.backward_s.size());
  // [L] when layer l's backward ends: layer L-1 runs first, right after the forward.
  std::vector<double> layer_end(facts.backward_s.size(), 0);
  double t = facts.forward_s;
  for (int l = layers - 1; l >= 0; --l) {
    check_time(facts.backward_s[static_cast<size_t>(l)], "layer " + std::to_string(l) + "'s backward");
    t += facts.backward_s[static_cast<size_t>(l)];
    layer_end[static_cast<size_t>(l)] = t;
  }
  DdpStepPrediction p;
  p.backward_end = t;
  double link_free = 0;  // one bucket at a time: the next starts when the previous ended
  for (const BucketFacts& b : facts.buckets) {
    check(b.ready_layer >= 0 && b.ready_layer < layers,
          "a bucket becomes ready at layer " + std::to_string(b.ready_layer) + ", but the model has " +
              std::to_string(layers) + " layers", ErrorClass::ValueError);
    BucketTiming timing;
    timing.ready = layer_end[static_cast<size_t>(b.ready_layer)];
    timing.start = std::max(timing.ready, link_free);
    timing.end = timing.start + collective_seconds(facts.collective, facts.world, b.bytes, link);
    link_free = timing.end;
    p.bytes_per_step += b.bytes;
    p.buckets.push_back(timing);
  }
  p.exposed_s = std::max(0.0, link_free - p.backward_end);
  p.step_s = p.backward_end + p.exposed_s + facts.after_backward_s;
  return p;
}

}  // namespace dpv::netmodel
