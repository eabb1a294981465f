#pragma once
// An observer that adds up the measured time of every stage kind (scatter,
// replicate, forward, ...), and of each layer's forward and backward, for "where the time goes"
// in `dpv bench`.
#include <array>
#include <cstdint>
#include <vector>

#include "engine/observer.h"

namespace dpv::cli {

constexpr int kStageKinds = static_cast<int>(StageKind::Finalize) + 1;  // every kind, DataParallel and DDP

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
    }
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
};

}  // namespace dpv::cli
