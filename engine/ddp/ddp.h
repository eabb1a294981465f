#pragma once
// DistributedDataParallel on the devices of one DeviceSet (cpu:K, or GPUs), one in-process rank
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
#include "engine/strategy.h"

namespace dpv {

// What persists between iterations: the group, and one DdpRank per device (constructed by the
// first iteration's Construct stage).
class DdpTrainer : public Strategy {
 public:
  DdpTrainer(std::shared_ptr<DeviceSet> devices, Model model, const TensorMap& state, DdpOptions options);
  ~DdpTrainer() override;
  DdpTrainer(const DdpTrainer&) = delete;
  DdpTrainer& operator=(const DdpTrainer&) = delete;

  StrategyKind kind() const override { return rank_strategy(options_.zero_stage); }
  int world_size() const { return devices_->size(); }
  DeviceSet& devices() const override { return *devices_; }
  const Model& model() const override { return model_; }
  std::string transport() const override { return "in-process ring (one thread per rank)"; }
  StrategyTensors tensors() const override;  // rank 0's
  // A DdpIteration (below) on this trainer, the sampler without shuffling.
  std::unique_ptr<StrategyIteration> begin_iteration(const Tensor& input, const Tensor& target,
                                                     Observer* observer = nullptr) override;
  const DdpOptions& options() const { return options_; }
  // Every rank's (and, before Construct, the ranks-to-be's) learning rate.
  void set_learning_rate(double lr) override;
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

class DdpIteration : public StrategyIteration {
 public:
  // input [N, ...] and int64 target [N]: the GLOBAL batch; rank r trains on the DistributedSampler
  // indices of it (shuffle off by default: `dpv step --ddp`'s contract).
  DdpIteration(DdpTrainer& trainer, const Tensor& input, const Tensor& target, Observer* observer = nullptr,
               SamplerOptions sampler = no_shuffle());
  StrategyKind strategy() const override { return trainer_.kind(); }
  const std::vector<Stage>& plan() const override { return plan_; }
  int next_index() const override { return next_; }
  StageEvent step() override;
  void run_to_end() override;

  const std::vector<std::vector<int64_t>>& shards() const { return shards_; }  // per rank: sample indices
  const std::vector<std::vector<bool>>& padding() const { return padding_; }  // per rank: padding duplicates
  // Whether stages build value snapshots (StageEvent::devices' tensors, ranks, batchnorm, loss).
  // On when the observer wants them; the app's engine worker asks for them without an observer.
  void set_snapshots(bool on) override { snapshots_ = on; }
  bool snapshots() const override { return snapshots_; }
  // Every stage's event carries each rank's memory by kind (DeviceState::memory, no values read),
  // with or without snapshots: what `dpv bench memory` adds up.
  void set_memory_accounts(bool on) { memory_accounts_ = on; }
  double loss() const override;               // rank 0's own loss (after Loss), as rank 0 prints it
  std::vector<double> rank_losses() const override;
  Tensor output() const override;             // rank 0's output on its device
  std::vector<int64_t> output_rows() const override { return shards_.empty() ? std::vector<int64_t>{} : shards_[0]; }
  std::vector<RankOutput> rank_outputs() const override;  // each rank's output and shard
  const std::vector<BatchNormStats>& batchnorm_stats() const override { return bn_stats_; }

  static SamplerOptions no_shuffle() {
    SamplerOptions o;
    o.shuffle = false;
    return o;
  }

 private:
  void run_ranks_through();  // run_to_end without an observer: each rank's stages on its own thread
  // One stage of step(), in the pieces it is made of.
  using RankReports = std::vector<std::vector<CollectiveReport>>;  // [world] each rank's collectives
  using RankJob = std::function<void(DdpRank&, int)>;               // (rank, its index)
  StageEvent begin_event() const;  // the event's index, stage, shard sizes and start time
  bool ranks_independent(const Stage& stage) const;
  void on_ranks(bool independent, const RankJob& fn);  // fn on every rank, on the ranks' threads, timed
  void run_stage(StageEvent& e, RankReports& reports, bool independent);
  void sample_stage(StageEvent& e, bool independent);
  void forward_stage(StageEvent& e, RankReports& reports, bool independent);
  void finalize_stage(StageEvent& e, RankReports& reports, bool independent);
  void fill_devices(StageEvent& e) const;
  void fill_ranks(StageEvent& e) const;

  DdpTrainer& trainer_;
  Tensor input_, target_;
  Observer* observer_;
  std::vector<Stage> plan_;
  std::vector<std::vector<int64_t>> shards_;
  std::vector<std::vector<bool>> padding_;
  bool snapshots_ = false;
  bool memory_accounts_ = false;
  bool gathered_once_ = false;  // ZeRO-3: the next GatherParams is the one before the backward
  bool backward_started_ = false, finalized_ = false, loss_computed_ = false;
  int next_ = 0;
  bool failed_ = false;
  double t0_ = 0;
  std::vector<double> busy_start_, busy_end_;
  std::vector<BatchNormStats> bn_stats_;
};

}  // namespace dpv
