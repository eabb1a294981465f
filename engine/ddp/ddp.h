#pragma once
// DistributedDataParallel on the devices of one DeviceSet (cpu:W, or GPUs), one in-process rank
// per device, as an explicit plan of stages that runs straight through or one stage at a time
// through the same code (DdpIteration::step), each stage's work running on every rank in
// parallel (on the ranks' device threads) and reported to the Observer like DataParallel's.
//
//   Construct (first iteration only)  Sample  [BroadcastBuffers]  Forward 0..L-1  Loss
//   Backward L-1..0 (bucket all-reduces launch as buckets fill and run on the group's
//   communication thread, overlapping the backward stages that follow)  Finalize  Step
//
// The per-rank work is DdpRank's (engine/ddp/ddp_rank.h), the same code launched processes run.
#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "engine/ddp/ddp_rank.h"
#include "engine/ddp/sampler.h"
#include "engine/device.h"
#include "engine/observer.h"

namespace dpv {

// What persists between iterations: the group, and one DdpRank per device (constructed by the
// first iteration's Construct stage).
class DdpTrainer {
 public:
  DdpTrainer(std::shared_ptr<DeviceSet> devices, Model model, const TensorMap& state, DdpOptions options);
  ~DdpTrainer();
  DdpTrainer(const DdpTrainer&) = delete;
  DdpTrainer& operator=(const DdpTrainer&) = delete;

  int world_size() const { return devices_->size(); }
  DeviceSet& devices() const { return *devices_; }
  const Model& model() const { return model_; }
  const DdpOptions& options() const { return options_; }
  bool constructed() const { return constructed_; }
  DdpRank& rank(int r) const;
  ProcessGroup& group(int r) const { return *group_.at(static_cast<size_t>(r)); }
  double now() const;  // seconds since the trainer was made (the ranks' clock)

  // Builds every rank's DDP (the construction collectives run on all ranks at once).
  void construct();
  // Runs fn(r) for every rank on its device's thread; records each rank's busy span. A rank that
  // fails aborts the group so no other rank waits for it, and the lowest rank's own error is
  // rethrown; the trainer cannot run further iterations after that. `independent`: no rank's job
  // waits for another's (no collective met on the ranks' threads), so on simulated devices a rank
  // whose thread has not started may run on another's (DeviceSet::run_parallel's stealing).
  void run_ranks(const std::function<void(int)>& fn, std::vector<double>& busy_start, std::vector<double>& busy_end,
                 bool independent = false);
  std::vector<DdpRankResult> results() const;

 private:
  std::shared_ptr<DeviceSet> devices_;
  Model model_;
  DdpOptions options_;
  TensorMap initial_state_;
  std::vector<std::unique_ptr<ProcessGroup>> group_;
  std::vector<std::unique_ptr<DdpRank>> ranks_;
  bool constructed_ = false;
  bool broken_ = false;
  std::function<double()> clock_;
};

class DdpIteration {
 public:
  // input [N, ...] and int64 target [N]: the GLOBAL batch; rank r trains on the DistributedSampler
  // indices of it (shuffle off by default: `dpv step --ddp`'s contract).
  DdpIteration(DdpTrainer& trainer, const Tensor& input, const Tensor& target, Observer* observer = nullptr,
               SamplerOptions sampler = no_shuffle());
  const std::vector<Stage>& plan() const { return plan_; }
  int next_index() const { return next_; }
  bool finished() const { return next_ >= static_cast<int>(plan_.size()); }
  StageEvent step();
  void run_to_end();

  const std::vector<std::vector<int64_t>>& shards() const { return shards_; }  // per rank: sample indices
  const std::vector<std::vector<bool>>& padding() const { return padding_; }  // per rank: padding duplicates
  // Whether stages build value snapshots (StageEvent::devices' tensors, ranks, batchnorm, loss).
  // On when the observer wants them; the app's engine worker asks for them without an observer.
  void set_snapshots(bool on) { snapshots_ = on; }
  bool snapshots() const { return snapshots_; }
  double mean_loss() const;  // mean of the ranks' losses (after Loss)
  const std::vector<BatchNormStats>& batchnorm_stats() const { return bn_stats_; }

  static SamplerOptions no_shuffle() {
    SamplerOptions o;
    o.shuffle = false;
    return o;
  }

 private:
  void run_ranks_through();  // run_to_end without an observer: each rank's stages on its own thread
  void fill_devices(StageEvent& e) const;
  void fill_ranks(StageEvent& e) const;

  DdpTrainer& trainer_;
  Tensor input_, target_;
  Observer* observer_;
  std::vector<Stage> plan_;
  std::vector<std::vector<int64_t>> shards_;
  std::vector<std::vector<bool>> padding_;
  bool snapshots_ = false;
  bool backward_started_ = false, finalized_ = false, loss_computed_ = false;
  int next_ = 0;
  bool failed_ = false;
  double t0_ = 0;
  std::vector<double> busy_start_, busy_end_;
  std::vector<BatchNormStats> bn_stats_;
};

}  // namespace dpv
