// CUDA backend vs CPU backend on the inputs the parity suites do not try: NaN, zero scales, K = 0
// products, ignore_index, empty tensors, and tensors large enough that every thread of a
// grid-stride loop takes a second trip. Outputs start as NaN where a call must overwrite them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/kernels/kernel_test_util.h"

namespace dpv::test {
namespace {

class EdgeCases : public GpuParity {};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST_P(EdgeCases, ReluPropagatesNaNBothWays) {
  Tensor x = Tensor::from_doubles({5}, dt(), {kNaN, -1.0, 0.0, 2.0, -kNaN});
  Tensor y = Tensor::full({5}, dt(), 7.0), gy = Tensor::full({5}, dt(), 7.0, gpu());
  cpu_backend().relu_forward(x, y);
  gpu_be().relu_forward(to_gpu(x), gy);
  EXPECT_TRUE(std::isnan(y.to_doubles()[0])) << "relu(nan) is nan in PyTorch";
  EXPECT_TRUE(close(gy, y, 0));
  Tensor dy = Tensor::from_doubles({5}, dt(), {1.5, 2.0, 3.0, 4.0, 5.0});
  Tensor dx = Tensor::full({5}, dt(), kNaN), gdx = Tensor::full({5}, dt(), kNaN, gpu());
  cpu_backend().relu_backward(y, dy, dx);
  gpu_be().relu_backward(gy, to_gpu(dy), gdx);
  EXPECT_EQ(dx.to_doubles(), (std::vector<double>{1.5, 0.0, 0.0, 4.0, 5.0})) << "threshold_backward passes dy at nan";
  EXPECT_TRUE(close(gdx, dx, 0));
}

TEST_P(EdgeCases, ScaleByZeroAndGemmWithKZeroWriteZeros) {
  Tensor t = Tensor::full({33}, dt(), kNaN), gt = Tensor::full({33}, dt(), kNaN, gpu());
  cpu_backend().scale_inplace(t, 0.0);
  gpu_be().scale_inplace(gt, 0.0);
  EXPECT_EQ(gt.to_doubles(), std::vector<double>(33, 0.0));
  EXPECT_EQ(t.to_doubles(), std::vector<double>(33, 0.0));
  const int64_t M = 3, N = 4;
  Tensor a = Tensor::empty({M, 0}, dt(), gpu()), b = Tensor::empty({0, N}, dt(), gpu());
  Tensor c = Tensor::full({M, N}, dt(), kNaN, gpu());
  gpu_be().gemm(false, false, M, N, 0, 1.0, a, b, 0.0, c);
  EXPECT_EQ(c.to_doubles(), std::vector<double>(M * N, 0.0)) << "K = 0, beta = 0: C = 0";
}

TEST_P(EdgeCases, CrossEntropyIgnoresTargetMinus100) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const int64_t N = 67, K = 10;
  Tensor logits = random_host({N, K}, dt(), rng_, -4, 4);
  std::vector<int64_t> t(static_cast<size_t>(N));
  std::uniform_int_distribution<int64_t> cls(0, K - 1);
  std::bernoulli_distribution skip(0.25);
  for (auto& v : t) v = skip(rng_) ? kIgnoreIndex : cls(rng_);
  t[0] = kIgnoreIndex;
  t[1] = 3;
  Tensor target = Tensor::from_int64({N}, t);
  Tensor loss = Tensor::empty({1}, dt()), dlogits = Tensor::full({N, K}, dt(), kNaN);
  Tensor gloss = Tensor::empty({1}, dt(), gpu()), gdlogits = Tensor::full({N, K}, dt(), kNaN, gpu());
  cpu_backend().cross_entropy(logits, target, loss, dlogits, 1.0);
  gpu_be().cross_entropy(to_gpu(logits), target.to(gpu()), gloss, gdlogits, 1.0);
  EXPECT_TRUE(close(gloss, loss, tol(dt(), true))) << "loss";
  EXPECT_TRUE(close(gdlogits, dlogits, tol(dt(), true))) << "dlogits";
  const std::vector<double> g = gdlogits.to_doubles();
  for (int64_t k = 0; k < K; ++k) EXPECT_EQ(g[static_cast<size_t>(k)], 0.0) << "an ignored row's gradient is 0";

  // Every row ignored: the mean of nothing is nan, every gradient 0 (PyTorch's result).
  Tensor ignored = Tensor::from_int64({N}, std::vector<int64_t>(static_cast<size_t>(N), kIgnoreIndex)).to(gpu());
  gpu_be().cross_entropy(to_gpu(logits), ignored, gloss, gdlogits, 1.0);
  EXPECT_TRUE(std::isnan(gloss.to_doubles()[0]));
  EXPECT_EQ(gdlogits.to_doubles(), std::vector<double>(static_cast<size_t>(N * K), 0.0));
}

TEST_P(EdgeCases, EmptyInputs) {
  Tensor x = Tensor::empty({0, 5}, dt(), gpu()), y = Tensor::empty({0, 5}, dt(), gpu());
  gpu_be().relu_forward(x, y);
  gpu_be().scale_inplace(y, 0.0);
  Tensor loss = Tensor::full({1}, dt(), 1.0, gpu()), dlogits = Tensor::empty({0, 5}, dt(), gpu());
  gpu_be().cross_entropy(x, Tensor::empty({0}, DType::Int64, gpu()), loss, dlogits, 1.0);
  EXPECT_TRUE(std::isnan(loss.to_doubles()[0])) << "the mean over no rows is nan";
}

// 2^23 + 17 elements: more than a grid of (multiprocessors x 64) blocks of 256 threads on any GPU
// up to 500 multiprocessors, so every thread runs its loop at least twice.
TEST_P(EdgeCases, GridStrideLoopsCoverLargeTensors) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const int64_t n = (int64_t{1} << 23) + 17;
  Tensor p = random_host({n}, dt(), rng_), g = random_host({n}, dt(), rng_), buf = random_host({n}, dt(), rng_);
  Tensor gp = to_gpu(p), gbuf = to_gpu(buf);
  cpu_backend().sgd_update(p, g, buf, 0.05, 0.9, 1e-3, false);
  gpu_be().sgd_update(gp, to_gpu(g), gbuf, 0.05, 0.9, 1e-3, false);
  EXPECT_TRUE(close(gp, p, tol(dt(), false))) << "param";
  EXPECT_TRUE(close(gbuf, buf, tol(dt(), false))) << "momentum buffer";
  Tensor y = Tensor::empty({n}, dt()), gy = Tensor::full({n}, dt(), kNaN, gpu());
  cpu_backend().relu_forward(p, y);
  gpu_be().relu_forward(gp, gy);
  EXPECT_TRUE(close(gy, y, tol(dt(), false))) << "relu";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, EdgeCases, ::testing::Values(DType::Float32, DType::Float64),
                         [](const auto& info) { return std::string(dtype_label(info.param)); });

}  // namespace
}  // namespace dpv::test
