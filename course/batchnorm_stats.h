#pragma once
// What the BatchNorm lab and the course's scenarios compute from the engine's per-device BatchNorm
// statistics and outputs, once: the statistics of a whole batch from its chunks (what SyncBatchNorm
// normalises with), PyTorch's running-statistics update, and the accuracy of a batch of logits
// (also `dpv train`'s).
#include <limits>
#include <vector>

#include "engine/observer.h"
#include "engine/strategy.h"
#include "engine/tensor.h"

namespace dpv::course {

// The mean and biased variance over the union of the chunks, per channel: count-weighted means,
// and within-chunk variance plus the spread of the chunk means. device is -1 (global); layer is
// the first chunk's. Empty chunks give empty statistics.
BatchNormStats merge_batchnorm_stats(const std::vector<BatchNormStats>& chunks);

// PyTorch's update of a BatchNorm layer's buffers after one training forward, in place:
//   running_mean = (1 - momentum) * running_mean + momentum * batch mean
//   running_var  = (1 - momentum) * running_var  + momentum * batch var * n / (n - 1)
// (the unbiased variance of the batch's n values per channel; n = batch.count).
void update_running_stats(std::vector<double>& running_mean, std::vector<double>& running_var,
                          const BatchNormStats& batch, double momentum);

inline constexpr double kNoAccuracy = std::numeric_limits<double>::quiet_NaN();
// Fraction of rows of logits [N, classes] whose largest logit is the target (targets [N]);
// kNoAccuracy (NaN) when the logits are not [N, classes] with N > 0 matching the targets.
double accuracy(const Tensor& logits, const Tensor& targets);
// accuracy over every rank's rows together (StrategyIteration::rank_outputs): a row a padded
// shard repeats counts once per rank that computed it. kNoAccuracy without rows.
double accuracy_over_ranks(const std::vector<RankOutput>& outputs, const Tensor& targets);

}  // namespace dpv::course
