// kernels/math/batchnorm.h on the CPU: the forward in both of PyTorch's forms, the backward terms,
// invstd and the running-statistics update, with NaN and zero inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/math/batchnorm.h"

namespace dpv::kernels::math {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(BatchNormMath, BothForwardFormsAgree) {
  const double x = 3.25, mean = 1.5, invstd = 0.8, gamma = 1.2, beta = -0.3;
  const double direct = bn_normalize(x, mean, invstd, gamma, beta);
  EXPECT_DOUBLE_EQ(direct, (x - mean) * invstd * gamma + beta);
  EXPECT_NEAR(bn_apply_affine(x, bn_fold_affine(mean, invstd, gamma, beta)), direct, 1e-15);
  EXPECT_EQ(bn_normalize(mean, mean, invstd, gamma, beta), beta) << "x = mean normalises to beta";
}

TEST(BatchNormMath, NaNPropagatesThroughTheForward) {
  EXPECT_TRUE(std::isnan(bn_normalize(kNaN, 0.0, 1.0, 1.0, 0.0)));
  EXPECT_TRUE(std::isnan(bn_apply_affine(kNaN, bn_fold_affine(0.0, 1.0, 1.0, 0.0))));
  EXPECT_TRUE(std::isnan(bn_normalize(1.0, kNaN, 1.0, 1.0, 0.0)));
}

TEST(BatchNormMath, InvstdOfZeroVarianceIsOneOverSqrtEps) {
  EXPECT_DOUBLE_EQ(bn_invstd(0.0, 1e-5), 1.0 / std::sqrt(1e-5));
  EXPECT_DOUBLE_EQ(bn_invstd(3.0, 1.0), 0.5);
  EXPECT_TRUE(std::isnan(bn_invstd(kNaN, 1e-5)));
}

TEST(BatchNormMath, RunningStatisticsUseTheUnbiasedVariance) {
  EXPECT_DOUBLE_EQ(bn_unbiased_var(2.0, 4.0), 2.0 * 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(bn_running_update(1.0, 3.0, 0.1), 0.1 * 3.0 + 0.9 * 1.0);
  EXPECT_EQ(bn_running_update(5.0, 7.0, 0.0), 5.0) << "momentum 0 keeps the running value";
  EXPECT_TRUE(std::isinf(bn_unbiased_var(2.0, 1.0))) << "one sample: n / (n - 1) divides by zero, as PyTorch";
}

TEST(BatchNormMath, BackwardTermsGiveTheClosedForm) {
  const double dy = 0.7, x = 2.0, mean = 1.25, invstd = 1.6, gamma = 0.9, sum_dy = 3.0, sum_dy_xmu = -1.2, n = 6;
  const BnBackwardTerms<double> t = bn_backward_terms(sum_dy, sum_dy_xmu, n, invstd, gamma);
  EXPECT_DOUBLE_EQ(t.mean_dy, sum_dy / n);
  EXPECT_DOUBLE_EQ(t.scale, invstd * gamma);
  const double want = (dy - sum_dy / n - (x - mean) * invstd * invstd * sum_dy_xmu / n) * invstd * gamma;
  EXPECT_NEAR(bn_backward_elemt(dy, x, mean, t), want, 1e-15);
  // Zero upstream gradient everywhere: zero input gradient.
  EXPECT_EQ(bn_backward_elemt(0.0, x, mean, bn_backward_terms(0.0, 0.0, n, invstd, gamma)), 0.0);
  // float32 terms, as the CPU backend computes them.
  const BnBackwardTerms<float> f = bn_backward_terms(3.0f, -1.2f, 6.0f, 1.6f, 0.9f);
  EXPECT_NEAR(bn_backward_elemt(0.7f, 2.0f, 1.25f, f), want, 1e-6);
}

}  // namespace
}  // namespace dpv::kernels::math
