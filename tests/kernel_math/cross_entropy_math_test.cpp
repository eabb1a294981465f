// Cross-entropy with ignore_index on the CPU: the row math of kernels/math/cross_entropy.h, the
// kernel's workspace layout, and the CPU backend that runs the same math (PyTorch 1.13's results
// for the same inputs are in tests/fixtures/mlp_ignore_index_cpu2).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/error.h"
#include "engine/tensor.h"
#include "kernels/math/cross_entropy.h"

namespace dpv {
namespace {

namespace math = kernels::math;

TEST(CrossEntropyMath, TargetsAreCountedIgnoredOrOutOfRange) {
  EXPECT_EQ(math::classify_target(0, 3), math::TargetKind::Counted);
  EXPECT_EQ(math::classify_target(2, 3), math::TargetKind::Counted);
  EXPECT_EQ(math::classify_target(-100, 3), math::TargetKind::Ignored);
  EXPECT_EQ(math::classify_target(3, 3), math::TargetKind::OutOfRange);
  EXPECT_EQ(math::classify_target(-1, 3), math::TargetKind::OutOfRange);
  EXPECT_EQ(math::classify_target(-101, 3), math::TargetKind::OutOfRange);
  EXPECT_EQ(math::classify_target(0, 0), math::TargetKind::OutOfRange) << "no classes: nothing is in range";
}

TEST(CrossEntropyMath, MeanOfNoRowsIsNaN) {
  EXPECT_TRUE(std::isnan(math::ce_mean(0.0, 0)));
  EXPECT_DOUBLE_EQ(math::ce_mean(3.0, 2), 1.5);
}

TEST(CrossEntropyMath, RowGradientSumsToZero) {
  const double logits[3] = {0.5, -1.0, 2.0};
  const double lse = std::log(std::exp(0.5) + std::exp(-1.0) + std::exp(2.0));
  double sum = 0;
  for (int k = 0; k < 3; ++k) sum += math::ce_grad(logits[k], lse, k == 2, 0.25);
  EXPECT_NEAR(sum, 0.0, 1e-15);
  EXPECT_DOUBLE_EQ(math::ce_row_loss(lse, logits[2]), lse - 2.0);
}

TEST(CrossEntropyMath, WorkspaceLayoutIsAlignedAndDisjoint) {
  for (int64_t N : {0, 1, 2, 3, 63, 1000}) {
    const int64_t offset = math::ce_info_offset(N);
    EXPECT_EQ(offset % 16, 0) << N;
    EXPECT_GE(offset, N * 8) << "the report must not overlap the row losses";
    EXPECT_EQ(math::ce_workspace_bytes(N), offset + static_cast<int64_t>(sizeof(math::CeInfo)));
  }
}

class CpuCrossEntropy : public ::testing::TestWithParam<DType> {
 protected:
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  DType dt() const { return GetParam(); }
  // loss and dlogits of the CPU backend; dlogits starts as NaN so every element must be written.
  std::pair<double, std::vector<double>> run(const Tensor& logits, const std::vector<int64_t>& target, double scale = 1) {
    Tensor loss = Tensor::empty({1}, dt());
    Tensor dlogits = Tensor::full(logits.shape(), dt(), std::nan(""));
    cpu->cross_entropy(logits, Tensor::from_int64({static_cast<int64_t>(target.size())}, target), loss, dlogits, scale);
    return {loss.to_doubles()[0], dlogits.to_doubles()};
  }
};

TEST_P(CpuCrossEntropy, IgnoredRowsLeaveTheMeanAndGetZeroGradients) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-3, 3);
  const int64_t N = 9, K = 4;
  std::vector<double> values(static_cast<size_t>(N * K));
  for (double& v : values) v = u(rng);
  const std::vector<int64_t> target{1, -100, 3, 0, -100, 2, 2, -100, 1};
  auto [loss, grad] = run(Tensor::from_doubles({N, K}, dt(), values), target, 0.5);

  // The same loss over only the counted rows, without any ignored row.
  std::vector<double> kept_values;
  std::vector<int64_t> kept_target;
  for (int64_t i = 0; i < N; ++i)
    if (target[static_cast<size_t>(i)] != -100) {
      kept_values.insert(kept_values.end(), values.begin() + i * K, values.begin() + (i + 1) * K);
      kept_target.push_back(target[static_cast<size_t>(i)]);
    }
  const int64_t n = static_cast<int64_t>(kept_target.size());
  auto [kept_loss, kept_grad] = run(Tensor::from_doubles({n, K}, dt(), kept_values), kept_target, 0.5);
  EXPECT_EQ(loss, kept_loss) << "the mean is over the 6 counted rows";
  for (int64_t i = 0, j = 0; i < N; ++i) {
    for (int64_t k = 0; k < K; ++k) {
      const double g = grad[static_cast<size_t>(i * K + k)];
      if (target[static_cast<size_t>(i)] == -100)
        EXPECT_EQ(g, 0.0) << "row " << i;
      else
        EXPECT_EQ(g, kept_grad[static_cast<size_t>(j * K + k)]) << "row " << i << " scaled by 0.5 / 6";
    }
    j += target[static_cast<size_t>(i)] != -100;
  }
}

TEST_P(CpuCrossEntropy, AllRowsIgnoredGiveNaNLossAndZeroGradients) {
  auto [loss, grad] = run(Tensor::full({3, 5}, dt(), 0.25), {-100, -100, -100});
  EXPECT_TRUE(std::isnan(loss));
  EXPECT_EQ(grad, std::vector<double>(15, 0.0));
}

TEST_P(CpuCrossEntropy, EmptyBatchGivesNaN) {
  auto [loss, grad] = run(Tensor::empty({0, 5}, dt()), {});
  EXPECT_TRUE(std::isnan(loss));
  EXPECT_TRUE(grad.empty());
}

TEST_P(CpuCrossEntropy, OtherNegativeTargetsAreStillErrors) {
  for (int64_t bad : {int64_t{-1}, int64_t{-101}, int64_t{5}}) {
    try {
      run(Tensor::zeros({2, 5}, dt()), {-100, bad});
      ADD_FAILURE() << "target " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), "IndexError");
      EXPECT_EQ(std::string(e.what()), "Target " + std::to_string(bad) + " is out of bounds.");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuCrossEntropy, ::testing::Values(DType::Float32, DType::Float64),
                         [](const auto& info) { return std::string(info.param == DType::Float32 ? "float32" : "float64"); });

}  // namespace
}  // namespace dpv
