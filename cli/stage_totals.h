#pragma once
// An observer that adds up the measured time of every stage kind (scatter,
// replicate, forward, ...), and of each layer's forward and backward, for "where the time goes"
// in `dpv bench`.
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "engine/observer.h"

namespace dpv::cli {

constexpr int kStageKinds = static_cast<int>(StageKind::BroadcastParams) + 1;  // every kind: DP, DDP and ZeRO

class StageTotals : public Observer {
 public:
  void on_stage(const StageEvent& e) override {
    seconds[static_cast<size_t>(e.stage.kind)] += e.t_end - e.t_start;
    bytes[static_cast<size_t>(e.stage.kind)] += e.bytes_moved;
    const bool forward = e.stage.kind == StageKind::Forward, backward = e.stage.kind == StageKind::Backward;
    if ((forward || backward) && e.stage.layer >= 0) {
      const size_t layer = static_cast<size_t>(e.stage.layer);
      if (layer >= forward_by_layer.size()) {
        forward_by_layer.resize(layer + 1);
        backward_by_layer.resize(layer + 1);
      }
      (forward ? forward_by_layer : backward_by_layer)[layer] += e.t_end - e.t_start;
      auto& samples = forward ? forward_samples : backward_samples;
      if (layer >= samples.size()) samples.resize(layer + 1);
      samples[layer].push_back(e.t_end - e.t_start);
    }
  }
  // A layer's median forward or backward time over the observed iterations (seconds): on a
  // shared machine one preempted stage would otherwise dominate a layer's mean.
  static double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
  }
  double forward_median(size_t layer) const {
    return layer < forward_samples.size() ? median(forward_samples[layer]) : 0;
  }
  double backward_median(size_t layer) const {
    return layer < backward_samples.size() ? median(backward_samples[layer]) : 0;
  }
  bool wants_snapshots() const override { return false; }  // timings and bytes only: no host copies
  double total() const {
    double t = 0;
    for (double s : seconds) t += s;
    return t;
  }
  std::array<double, kStageKinds> seconds{};
  std::array<uint64_t, kStageKinds> bytes{};
  std::vector<double> forward_by_layer, backward_by_layer;  // seconds, indexed by layer
  std::vector<std::vector<double>> forward_samples, backward_samples;  // [layer][iteration] seconds
};

}  // namespace dpv::cli
