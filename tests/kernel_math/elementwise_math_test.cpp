// kernels/math/elementwise.h on the CPU: the per-element ReLU, scale and SGD that both the CPU
// backend and the CUDA kernels run, with NaN, infinities, signed zeros and zero scales.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/math/elementwise.h"

namespace dpv::kernels::math {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(ElementwiseMath, ReluPropagatesNaNAndClampsTheRest) {
  EXPECT_TRUE(std::isnan(relu(kNaN)));
  EXPECT_TRUE(std::isnan(relu(-kNaN)));
  EXPECT_TRUE(std::isnan(relu(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(relu(-1.5), 0.0);
  EXPECT_EQ(relu(-kInf), 0.0);
  EXPECT_EQ(relu(kInf), kInf);
  EXPECT_EQ(relu(2.5f), 2.5f);
  EXPECT_EQ(relu(0.0), 0.0);
  EXPECT_FALSE(std::signbit(relu(-0.0))) << "relu(-0) is +0 (clamp_min writes the bound)";
}

TEST(ElementwiseMath, ReluBackwardIsThresholdBackwardOnTheOutput) {
  EXPECT_EQ(relu_backward(1.0, 3.0), 3.0);
  EXPECT_EQ(relu_backward(0.0, 3.0), 0.0);
  EXPECT_EQ(relu_backward(-0.0, 3.0), 0.0);
  EXPECT_EQ(relu_backward(kNaN, 3.0), 3.0) << "PyTorch: where(y <= 0, 0, dy), and nan <= 0 is false";
  EXPECT_TRUE(std::isnan(relu_backward(2.0, kNaN)));
  EXPECT_EQ(relu_backward(-1.0, kNaN), 0.0) << "a masked gradient is 0 even when it is nan";
}

TEST(ElementwiseMath, ScaleByZeroWritesZeroEvenOverNaN) {
  EXPECT_EQ(scale(kNaN, 0.0), 0.0);
  EXPECT_EQ(scale(kInf, 0.0), 0.0);
  EXPECT_EQ(scale(3.0f, 0.0f), 0.0f);
  EXPECT_EQ(scale(3.0, -2.0), -6.0);
  EXPECT_TRUE(std::isnan(scale(kNaN, 1.0)));
}

TEST(ElementwiseMath, SgdFollowsTorchOptimSgd) {
  // No momentum, no weight decay: p -= lr * g.
  double p = 1.0;
  sgd_update<double>(p, 0.5, nullptr, 0.1, 0.0, 0.0, true);
  EXPECT_DOUBLE_EQ(p, 0.95);
  // Weight decay: d = g + wd * p.
  p = 2.0;
  sgd_update<double>(p, 0.5, nullptr, 0.1, 0.0, 0.25, false);
  EXPECT_DOUBLE_EQ(p, 2.0 - 0.1 * (0.5 + 0.25 * 2.0));
  // Momentum, first step: buf = d; later: buf = momentum * buf + d.
  double buf = 123.0;  // ignored on the first step
  p = 1.0;
  sgd_update<double>(p, 0.5, &buf, 0.1, 0.9, 0.0, true);
  EXPECT_DOUBLE_EQ(buf, 0.5);
  EXPECT_DOUBLE_EQ(p, 0.95);
  sgd_update<double>(p, 0.5, &buf, 0.1, 0.9, 0.0, false);
  EXPECT_DOUBLE_EQ(buf, 0.9 * 0.5 + 0.5);
  EXPECT_DOUBLE_EQ(p, 0.95 - 0.1 * 0.95);
}

TEST(ElementwiseMath, SgdWithoutWeightDecayDoesNotTouchAnInfiniteParameter) {
  // PyTorch adds weight_decay * p only when weight_decay != 0: 0 * inf would be nan.
  double p = kInf, buf = 0.0;
  sgd_update<double>(p, 1.0, &buf, 0.1, 0.9, 0.0, true);
  EXPECT_EQ(buf, 1.0);
  EXPECT_EQ(p, kInf);
}

}  // namespace
}  // namespace dpv::kernels::math
