// CUDA backend vs CPU backend, operation by operation (part two): batch norm statistics,
// normalisation, backward, SyncBatchNorm's merge, running statistics, cross-entropy and SGD.
#include <gtest/gtest.h>

#include "engine/error.h"
#include "tests/kernels/kernel_test_util.h"

namespace dpv::test {
namespace {

class NormParity : public GpuParity {};

// Both layouts of the channel reductions: S == 1 (BatchNorm1d after Linear, column blocks) and
// S > 1 (BatchNorm2d, one block per channel); C not a multiple of 32.
const int64_t kR = 45, kC = 70;

TEST_P(NormParity, StatsNormalizeAndBackward) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  for (int64_t S : {int64_t{1}, int64_t{36}}) {
    SCOPED_TRACE("S = " + std::to_string(S));
    const Shape xs{kR, kC, S};
    // An offset far from zero makes a one-pass variance lose digits; two passes must not.
    Tensor x = random_host(xs, dt(), rng_, 3.0, 5.0);
    Tensor gx = to_gpu(x);
    Tensor mean = Tensor::empty({kC}, dt()), var = Tensor::empty({kC}, dt());
    Tensor gmean = Tensor::empty({kC}, dt(), gpu()), gvar = Tensor::empty({kC}, dt(), gpu());
    cpu_backend().bn_stats(x, mean, var, kR, kC, S);
    gpu_be().bn_stats(gx, gmean, gvar, kR, kC, S);
    EXPECT_TRUE(close(gmean, mean, tol(dt(), true))) << "mean";
    EXPECT_TRUE(close(gvar, var, tol(dt(), true))) << "var";

    Tensor invstd = Tensor::empty({kC}, dt()), ginvstd = Tensor::empty({kC}, dt(), gpu());
    cpu_backend().bn_invstd(var, 1e-5, invstd);
    gpu_be().bn_invstd(gvar, 1e-5, ginvstd);
    EXPECT_TRUE(close(ginvstd, invstd, tol(dt(), true))) << "invstd";

    Tensor gamma = random_host({kC}, dt(), rng_, 0.5, 1.5), beta = random_host({kC}, dt(), rng_);
    Tensor ggamma = to_gpu(gamma), gbeta = to_gpu(beta);
    Tensor y = Tensor::empty(xs, dt()), gy = Tensor::empty(xs, dt(), gpu());
    cpu_backend().bn_normalize(x, mean, invstd, gamma, beta, y, kR, kC, S);
    gpu_be().bn_normalize(gx, gmean, ginvstd, ggamma, gbeta, gy, kR, kC, S);
    EXPECT_TRUE(close(gy, y, tol(dt(), true))) << "normalize";

    Tensor dy = random_host(xs, dt(), rng_);
    Tensor gdy = to_gpu(dy);
    Tensor sdy = Tensor::empty({kC}, dt()), sdx = Tensor::empty({kC}, dt());
    Tensor gsdy = Tensor::empty({kC}, dt(), gpu()), gsdx = Tensor::empty({kC}, dt(), gpu());
    cpu_backend().bn_backward_reduce(dy, x, mean, sdy, sdx, kR, kC, S);
    gpu_be().bn_backward_reduce(gdy, gx, gmean, gsdy, gsdx, kR, kC, S);
    EXPECT_TRUE(close(gsdy, sdy, tol(dt(), true))) << "sum_dy";
    EXPECT_TRUE(close(gsdx, sdx, tol(dt(), true))) << "sum_dy_xmu";

    const double count = static_cast<double>(kR * S);
    Tensor dx = Tensor::empty(xs, dt()), gdx = Tensor::empty(xs, dt(), gpu());
    cpu_backend().bn_backward_elemt(dy, x, mean, invstd, gamma, sdy, sdx, count, dx, kR, kC, S);
    gpu_be().bn_backward_elemt(gdy, gx, gmean, ginvstd, ggamma, gsdy, gsdx, count, gdx, kR, kC, S);
    EXPECT_TRUE(close(gdx, dx, 10 * tol(dt(), true))) << "dx";
  }
}

TEST_P(NormParity, RunningStatsUnbiased) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  Tensor mean = random_host({kC}, dt(), rng_), var = random_host({kC}, dt(), rng_, 0.1, 2.0);
  Tensor rm = random_host({kC}, dt(), rng_), rv = random_host({kC}, dt(), rng_, 0.5, 1.5);
  Tensor grm = to_gpu(rm), grv = to_gpu(rv);
  cpu_backend().bn_update_running(mean, var, 8.0, 0.1, rm, rv);
  gpu_be().bn_update_running(to_gpu(mean), to_gpu(var), 8.0, 0.1, grm, grv);
  EXPECT_TRUE(close(grm, rm, tol(dt(), true)));
  EXPECT_TRUE(close(grv, rv, tol(dt(), true)));
}

TEST_P(NormParity, GatherStatsMergesRanksInOrder) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const int64_t W = 4;
  // Uneven counts and one empty rank (masked out, as PyTorch does for count < 1).
  const std::vector<double> counts{5, 3, 0, 7};
  Tensor mean_all = random_host({W, kC}, dt(), rng_), invstd_all = random_host({W, kC}, dt(), rng_, 0.5, 3.0);
  Tensor rm = random_host({kC}, dt(), rng_), rv = random_host({kC}, dt(), rng_, 0.5, 1.5);
  Tensor grm = to_gpu(rm), grv = to_gpu(rv);
  Tensor mean = Tensor::empty({kC}, dt()), invstd = Tensor::empty({kC}, dt());
  Tensor gmean = Tensor::empty({kC}, dt(), gpu()), ginvstd = Tensor::empty({kC}, dt(), gpu());
  cpu_backend().bn_gather_stats(mean_all, invstd_all, counts, 1e-5, 0.1, rm, rv, mean, invstd, W, kC);
  gpu_be().bn_gather_stats(to_gpu(mean_all), to_gpu(invstd_all), counts, 1e-5, 0.1, grm, grv, gmean, ginvstd, W, kC);
  // The CPU reference merges in the input precision, the kernel in double: float32 differs by rounding.
  const double t = dt() == DType::Float32 ? 1e-4 : 1e-12;
  EXPECT_TRUE(close(gmean, mean, t)) << "mean";
  EXPECT_TRUE(close(ginvstd, invstd, t)) << "invstd";
  EXPECT_TRUE(close(grm, rm, t)) << "running_mean";
  EXPECT_TRUE(close(grv, rv, t)) << "running_var";

  // Without running statistics (track_running_stats=False) the merge still runs. The outputs
  // start as NaN, so a call that wrote nothing cannot pass on the first call's results.
  Tensor none;
  gmean = Tensor::full({kC}, dt(), std::nan(""), gpu());
  ginvstd = Tensor::full({kC}, dt(), std::nan(""), gpu());
  gpu_be().bn_gather_stats(to_gpu(mean_all), to_gpu(invstd_all), counts, 1e-5, 0.1, none, none, gmean, ginvstd, W, kC);
  EXPECT_TRUE(close(gmean, mean, t)) << "mean without running statistics";
  EXPECT_TRUE(close(ginvstd, invstd, t)) << "invstd without running statistics";
}

TEST_P(NormParity, CrossEntropy) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  for (int64_t K : {int64_t{2}, int64_t{10}, int64_t{1000}}) {
    SCOPED_TRACE("K = " + std::to_string(K));
    const int64_t N = 67;
    Tensor logits = random_host({N, K}, dt(), rng_, -4, 4);
    std::vector<int64_t> t(static_cast<size_t>(N));
    std::uniform_int_distribution<int64_t> pick(0, K - 1);
    for (auto& v : t) v = pick(rng_);
    Tensor target = Tensor::from_int64({N}, t);
    Tensor loss = Tensor::empty({1}, dt()), dlogits = Tensor::empty({N, K}, dt());
    Tensor gloss = Tensor::empty({1}, dt(), gpu()), gdlogits = Tensor::empty({N, K}, dt(), gpu());
    cpu_backend().cross_entropy(logits, target, loss, dlogits, 0.5);
    gpu_be().cross_entropy(to_gpu(logits), target.to(gpu()), gloss, gdlogits, 0.5);
    EXPECT_TRUE(close(gloss, loss, tol(dt(), true))) << "loss";
    EXPECT_TRUE(close(gdlogits, dlogits, tol(dt(), true))) << "dlogits";
  }
}

TEST_P(NormParity, CrossEntropyTargetOutOfRangeIsAnError) {
  const int64_t N = 9, K = 5;
  Tensor logits = Tensor::zeros({N, K}, dt(), gpu());
  Tensor loss = Tensor::empty({1}, dt(), gpu()), dlogits = Tensor::empty({N, K}, dt(), gpu());
  // -100 is ignore_index, not an error; -101 and -1 are.
  for (int64_t bad : {int64_t{5}, int64_t{-1}, int64_t{-101}}) {
    std::vector<int64_t> t(N, 1);
    t[6] = bad;
    Tensor target = Tensor::from_int64({N}, t).to(gpu());
    try {
      gpu_be().cross_entropy(logits, target, loss, dlogits, 1.0);
      ADD_FAILURE() << "target " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), "IndexError");
      EXPECT_EQ(std::string(e.what()), "Target " + std::to_string(bad) + " is out of bounds.");
    }
  }
  // The device is still usable afterwards (no sticky CUDA error).
  Tensor target = Tensor::from_int64({N}, std::vector<int64_t>(N, 2)).to(gpu());
  gpu_be().cross_entropy(logits, target, loss, dlogits, 1.0);
  EXPECT_NEAR(loss.item(), std::log(5.0), 1e-6);
}

TEST_P(NormParity, SgdUpdate) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  struct Case { double momentum, weight_decay; bool first; };
  for (const Case& c : {Case{0.0, 0.0, true}, Case{0.9, 0.0, true}, Case{0.9, 1e-2, false}, Case{0.0, 5e-4, false}}) {
    SCOPED_TRACE("momentum " + std::to_string(c.momentum) + " wd " + std::to_string(c.weight_decay));
    Tensor p = random_host({301}, dt(), rng_), g = random_host({301}, dt(), rng_), buf = random_host({301}, dt(), rng_);
    Tensor gp = to_gpu(p), gbuf = to_gpu(buf);
    cpu_backend().sgd_update(p, g, buf, 0.05, c.momentum, c.weight_decay, c.first);
    gpu_be().sgd_update(gp, to_gpu(g), gbuf, 0.05, c.momentum, c.weight_decay, c.first);
    EXPECT_TRUE(close(gp, p, tol(dt(), false))) << "param";
    EXPECT_TRUE(close(gbuf, buf, tol(dt(), false))) << "momentum buffer";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NormParity, ::testing::Values(DType::Float32, DType::Float64),
                         [](const auto& info) { return std::string(dtype_label(info.param)); });

}  // namespace
}  // namespace dpv::test
