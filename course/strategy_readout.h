#pragma once
// What course/ reads from a strategy after an iteration that the Strategy interface
// (engine/strategy.h) does not hand out: the tensors a run keeps (parameters, BatchNorm buffers,
// gradients) and every rank's output with the rows of the global batch it belongs to. The lab
// and the DP-vs-DDP comparison read both strategies through these, so their own code is one path.
#include <cstdint>
#include <vector>

#include "engine/strategy.h"
#include "engine/tensor.h"
#include "engine/tensor_map.h"

namespace dpv::course {

// The tensors a strategy keeps after a step: DataParallel's on device 0 (its state dict holds the
// parameters and the buffers), DDP's on rank 0 (every rank holds the same parameters and averaged
// gradients; rank 0's buffers are the ones saved).
struct StrategyTensors {
  const TensorMap* params = nullptr;
  const TensorMap* buffers = nullptr;
  const TensorMap* grads = nullptr;  // of the last backward (DataParallel: reduced on device 0)
};
// dpv::Error for a strategy other than Trainer or DdpTrainer.
StrategyTensors strategy_tensors(Strategy& strategy);

// The mean of the ranks' losses (DataParallel computes one loss: that one), summed in rank order
// (DdpIteration::mean_loss's value).
double mean_rank_loss(const StrategyIteration& iteration);

// One rank's output [n, classes] (on its device) and the rows of the global batch it computed.
struct RankOutput {
  Tensor logits;
  std::vector<int64_t> rows;
};
// DataParallel: the gathered output, every row; DDP: each rank's output and DistributedSampler
// shard (padded, so a row may appear on two ranks).
std::vector<RankOutput> rank_outputs(const Strategy& strategy, const StrategyIteration& iteration);

// course::accuracy over every rank's rows together: a row a padded shard repeats counts once per
// rank that computed it. NaN (kNoAccuracy) without rows.
double accuracy_over_ranks(const std::vector<RankOutput>& outputs, const Tensor& targets);

}  // namespace dpv::course
