#pragma once
// One launched DDP rank (a process of a `dpv launch` job, engine/ddp/ddp_rank.h) behind the one
// strategy interface (engine/strategy.h), so `dpv train --ddp` under a launcher trains with the
// same loop as DataParallel and in-process DDP (cli/train_loop.cpp). Each iteration takes the
// GLOBAL batch and trains this rank on its DistributedSampler(shuffle=False) shard of it.
//
// With an observer every stage is timed and reported as this rank's own lane, the events the
// in-process DDP iteration reports (the same stage kinds): its compute on its device, and, carried
// by Finalize, its bucket all-reduces as they ran on its communication thread, overlapping the
// backward. Without one the iteration runs straight through. A launched rank builds no value
// snapshots: the other ranks' tensors live in other processes.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/ddp/ddp_rank.h"
#include "engine/strategy.h"

namespace dpv {

class DdpRankStrategy : public Strategy {
 public:
  // Constructs DDP on this rank: collectives, so every rank of `group` constructs at the same time.
  // `devices` holds this rank's one device.
  DdpRankStrategy(ProcessGroup& group, std::shared_ptr<DeviceSet> devices, Model model, const TensorMap& state,
                  DdpOptions options);

  StrategyKind kind() const override { return rank_strategy(rank_->zero_stage()); }
  const Model& model() const override { return model_; }
  DeviceSet& devices() const override { return *devices_; }
  std::string transport() const override;  // the group's backend ("gloo", "nccl")
  StrategyTensors tensors() const override { return {&rank_->params(), &rank_->buffers(), &rank_->grads()}; }
  std::unique_ptr<StrategyIteration> begin_iteration(const Tensor& input, const Tensor& target,
                                                     Observer* observer = nullptr) override;

  void set_learning_rate(double lr) override { rank_->set_learning_rate(lr); }
  DdpRank& rank() { return *rank_; }
  const DdpRank& rank() const { return *rank_; }
  double now() const { return clock_(); }  // seconds, the clock the rank times its buckets with

 private:
  ProcessGroup& group_;
  std::shared_ptr<DeviceSet> devices_;
  Model model_;  // the rank refers to it
  std::function<double()> clock_;
  std::unique_ptr<DdpRank> rank_;
};

}  // namespace dpv
