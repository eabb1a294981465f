// course/batchnorm_stats.h against values computed by hand: the merge of per-device statistics,
// PyTorch's running-statistics update, and the accuracy of a batch of logits.
#include <gtest/gtest.h>

#include <cmath>

#include "course/batchnorm_stats.h"

namespace dpv::course {
namespace {

// Mean and biased variance of a list of values.
std::pair<double, double> moments(const std::vector<double>& v) {
  double mean = 0, var = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) var += (x - mean) * (x - mean);
  return {mean, var / static_cast<double>(v.size())};
}

BatchNormStats chunk(int device, const std::vector<double>& values) {
  const auto [mean, var] = moments(values);
  return BatchNormStats{3, device, {mean}, {var}, static_cast<double>(values.size())};
}

TEST(BatchNormStatsTest, MergeOfChunksIsTheWholeBatch) {
  const std::vector<double> a = {1, 2, 4}, b = {-3, 7}, c = {0.5};
  std::vector<double> all = a;
  all.insert(all.end(), b.begin(), b.end());
  all.insert(all.end(), c.begin(), c.end());
  const auto [mean, var] = moments(all);
  const BatchNormStats merged = merge_batchnorm_stats({chunk(0, a), chunk(1, b), chunk(2, c)});
  EXPECT_EQ(merged.device, -1);
  EXPECT_EQ(merged.layer, 3);
  EXPECT_DOUBLE_EQ(merged.count, 6);
  ASSERT_EQ(merged.mean.size(), 1u);
  EXPECT_NEAR(merged.mean[0], mean, 1e-12);
  EXPECT_NEAR(merged.var[0], var, 1e-12);
  EXPECT_TRUE(merge_batchnorm_stats({}).mean.empty());
}

TEST(BatchNormStatsTest, RunningUpdateUsesTheUnbiasedVariance) {
  std::vector<double> mean = {0.0, 1.0}, var = {1.0, 1.0};
  const BatchNormStats batch{0, 0, {2.0, 3.0}, {0.5, 4.0}, 4};
  update_running_stats(mean, var, batch, 0.1);
  EXPECT_NEAR(mean[0], 0.9 * 0.0 + 0.1 * 2.0, 1e-12);
  EXPECT_NEAR(mean[1], 0.9 * 1.0 + 0.1 * 3.0, 1e-12);
  EXPECT_NEAR(var[0], 0.9 + 0.1 * 0.5 * 4.0 / 3.0, 1e-12);
  EXPECT_NEAR(var[1], 0.9 + 0.1 * 4.0 * 4.0 / 3.0, 1e-12);
}

TEST(BatchNormStatsTest, AccuracyCountsRowsWhoseLargestLogitIsTheTarget) {
  const Tensor logits = Tensor::from_doubles({4, 3}, DType::Float32, {0, 1, 0, /**/ 5, 1, 2, /**/ 0, 0, 9, /**/ 1, 2, 3});
  const Tensor targets = Tensor::from_int64({4}, {1, 0, 1, 2});
  EXPECT_DOUBLE_EQ(accuracy(logits, targets), 0.75);
  EXPECT_TRUE(std::isnan(accuracy(logits, Tensor::from_int64({3}, {0, 0, 0}))));
  EXPECT_TRUE(std::isnan(accuracy(Tensor::from_doubles({4}, DType::Float32, {0, 1, 2, 3}), targets)));
}

}  // namespace
}  // namespace dpv::course
