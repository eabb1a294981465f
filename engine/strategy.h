#pragma once
// One interface for every data-parallel strategy: what persists between iterations (a Strategy:
// the model, its state and optimizer on the devices) and one iteration as a plan of stages that
// runs straight through or one stage at a time (a StrategyIteration). DataParallel (Trainer,
// Iteration) and DistributedDataParallel (DdpTrainer, DdpIteration) implement it; front ends
// (the CLI's training loop, the app's engine worker) drive either through it, so a strategy is
// one implementation, not one more copy of every loop.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/model.h"
#include "engine/observer.h"
#include "engine/tensor.h"
#include "engine/tensor_map.h"

namespace dpv {

enum class StrategyKind : uint8_t {
  DataParallel,             // nn.DataParallel: one process, replicas made every iteration
  DistributedDataParallel,  // DDP: one rank per device, gradients all-reduced in buckets
  // The sharded strategies: DDP's ranks and data split, with state split across the ranks.
  Zero1,  // ZeroRedundancyOptimizer over DDP: optimizer state sharded, parameters broadcast
  Zero2,  // FSDP SHARD_GRAD_OP: flat parameter; gradients and optimizer state sharded
  Zero3,  // FSDP FULL_SHARD: parameters too, gathered before forward and backward, freed after
};

// The PyTorch class name ("DataParallel", "DistributedDataParallel", "ZeroRedundancyOptimizer",
// "FSDP(SHARD_GRAD_OP)", "FSDP(FULL_SHARD)").
inline const char* strategy_name(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::DataParallel: return "DataParallel";
    case StrategyKind::DistributedDataParallel: return "DistributedDataParallel";
    case StrategyKind::Zero1: return "ZeroRedundancyOptimizer";
    case StrategyKind::Zero2: return "FSDP(SHARD_GRAD_OP)";
    case StrategyKind::Zero3: return "FSDP(FULL_SHARD)";
  }
  return "DataParallel";
}

// The short name the app and the CLI use: "DP", "DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3".
inline const char* strategy_short_name(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::DataParallel: return "DP";
    case StrategyKind::DistributedDataParallel: return "DDP";
    case StrategyKind::Zero1: return "ZeRO-1";
    case StrategyKind::Zero2: return "ZeRO-2";
    case StrategyKind::Zero3: return "ZeRO-3";
  }
  return "DP";
}

// The ZeRO stage: 0 for DataParallel and DDP, 1..3 for the sharded strategies.
inline int zero_stage(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::Zero1: return 1;
    case StrategyKind::Zero2: return 2;
    case StrategyKind::Zero3: return 3;
    case StrategyKind::DataParallel:
    case StrategyKind::DistributedDataParallel: return 0;
  }
  return 0;
}

// The strategy of DDP's ranks with ZeRO stage `stage` (0: DDP itself).
inline StrategyKind rank_strategy(int stage) {
  switch (stage) {
    case 1: return StrategyKind::Zero1;
    case 2: return StrategyKind::Zero2;
    case 3: return StrategyKind::Zero3;
    default: return StrategyKind::DistributedDataParallel;
  }
}

// Every strategy but DataParallel runs one rank per device (DDP's ranks, sampler and outputs).
inline bool runs_ranks(StrategyKind kind) { return kind != StrategyKind::DataParallel; }

// The tensors a strategy keeps after a step, on their devices: DataParallel's on device 0 (its
// state dict holds the parameters and the buffers in one map), DDP's on rank 0 (every rank holds
// the same parameters and averaged gradients; rank 0's buffers are the ones saved); a launched
// rank's are its own.
struct StrategyTensors {
  const TensorMap* params = nullptr;
  const TensorMap* buffers = nullptr;
  const TensorMap* grads = nullptr;  // of the last backward (DataParallel: reduced on device 0)
};

// One rank's output [n, classes] (on its device) and the rows of the global batch it computed.
struct RankOutput {
  Tensor logits;
  std::vector<int64_t> rows;
};

class StrategyIteration {
 public:
  virtual ~StrategyIteration() = default;
  virtual StrategyKind strategy() const = 0;

  // The stages in order, and the index of the next one to run.
  virtual const std::vector<Stage>& plan() const = 0;
  virtual int next_index() const = 0;
  bool finished() const { return next_index() >= static_cast<int>(plan().size()); }
  // Runs the next stage and returns its event (also passed to the observer).
  virtual StageEvent step() = 0;
  // Runs the remaining stages.
  virtual void run_to_end() = 0;

  // Whether stages build value snapshots (the event's devices, ranks, statistics, loss). Off, an
  // iteration copies nothing from the devices to the host between stages.
  virtual bool snapshots() const = 0;
  virtual void set_snapshots(bool on) = 0;

  // After the Loss stage: loss.item() as the program prints it (DataParallel's one loss on
  // device 0; under DDP rank 0's own loss, which is not averaged over the ranks).
  virtual double loss() const = 0;
  // Each rank's loss: DataParallel computes one loss, so one entry.
  virtual std::vector<double> rank_losses() const = 0;
  // The mean of rank_losses(), summed in rank order (DataParallel: its one loss).
  double mean_rank_loss() const;
  // The output rank 0 computed (DataParallel: the gathered output on device 0), on its device,
  // and which rows of the global batch it belongs to (DataParallel: all of them, in order).
  virtual Tensor output() const = 0;
  virtual std::vector<int64_t> output_rows() const = 0;
  // Every rank's output with its rows: DataParallel's gathered output (every row); DDP's per rank
  // with its DistributedSampler shard (padded, so a row may appear on two ranks).
  virtual std::vector<RankOutput> rank_outputs() const { return {{output(), output_rows()}}; }
  // BatchNorm statistics of the last forward: per device (or rank), and global where synchronised.
  virtual const std::vector<BatchNormStats>& batchnorm_stats() const = 0;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual StrategyKind kind() const = 0;
  virtual const Model& model() const = 0;
  virtual DeviceSet& devices() const = 0;
  // How the devices talk ("host threads", "NCCL", "in-process ring (one thread per rank)").
  virtual std::string transport() const = 0;
  // What the run keeps after its last step (see StrategyTensors).
  virtual StrategyTensors tensors() const = 0;
  // One iteration on the global batch: input [N, ...] and int64 target [N], host tensors.
  virtual std::unique_ptr<StrategyIteration> begin_iteration(const Tensor& input, const Tensor& target,
                                                             Observer* observer = nullptr) = 0;
  // The optimizer's learning rate from the next Step on, as PyTorch's
  // `for g in optimizer.param_groups: g["lr"] = lr` between iterations (what a scheduler does).
  // Throws ValueError "Invalid learning rate: ..." (torch.optim.SGD's words) when lr < 0 or not finite.
  virtual void set_learning_rate(double lr) = 0;
};

// Throws torch.optim.SGD's ValueError when `lr` is negative or not a finite number.
void check_learning_rate(double lr);

}  // namespace dpv
