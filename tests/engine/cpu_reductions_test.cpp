// The CPU backend's per-channel reductions (BatchNorm statistics, BatchNorm's backward sums, the
// bias gradient's channel sums) against a plain long-double sum, on run lengths around the
// backend's accumulator lane count (remainders included) and on long runs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/datasets.h"
#include "engine/tensor.h"

namespace dpv {
namespace {

struct Layout {
  int64_t N, C, S;
};

class CpuReductions : public ::testing::TestWithParam<std::tuple<DType, Layout>> {
 protected:
  Tensor random(const Shape& shape, Rng& rng, double offset = 0) const {
    std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
    for (double& x : v) x = offset + rng.uniform(-1.0, 1.0);
    return Tensor::from_doubles(shape, std::get<0>(GetParam()), v);
  }
  double tolerance() const { return std::get<0>(GetParam()) == DType::Float32 ? 2e-6 : 1e-13; }
};

TEST_P(CpuReductions, MatchLongDoubleSums) {
  const auto [dtype, l] = GetParam();
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " N" + std::to_string(l.N) + " C" + std::to_string(l.C) + " S" +
               std::to_string(l.S));
  auto backend = make_cpu_backend();
  Rng rng(17);
  // An offset of 3 makes the variance's two passes matter (a one-pass sum of squares loses digits).
  const Tensor x = random({l.N, l.C, l.S}, rng, 3.0), dy = random({l.N, l.C, l.S}, rng);
  const std::vector<double> vx = x.to_doubles(), vdy = dy.to_doubles();
  Tensor mean = Tensor::empty({l.C}, dtype), var = Tensor::empty({l.C}, dtype);
  Tensor sum_dy = Tensor::empty({l.C}, dtype), sum_dy_xmu = Tensor::empty({l.C}, dtype);
  Tensor channel_sums = Tensor::full({l.C}, dtype, 0.5);
  backend->bn_stats(x, mean, var, l.N, l.C, l.S);
  backend->bn_backward_reduce(dy, x, mean, sum_dy, sum_dy_xmu, l.N, l.C, l.S);
  backend->sum_channels(dy, channel_sums, l.N, l.C, l.S, /*accumulate=*/true);
  const std::vector<double> got_mean = mean.to_doubles(), got_var = var.to_doubles();
  const std::vector<double> got_sdy = sum_dy.to_doubles(), got_sdxm = sum_dy_xmu.to_doubles();
  const std::vector<double> got_sums = channel_sums.to_doubles();
  const double n = static_cast<double>(l.N * l.S), tol = tolerance();
  for (int64_t c = 0; c < l.C; ++c) {
    long double s = 0, sq = 0, sdy = 0, sdxm = 0;
    auto at = [&](int64_t r, int64_t i) { return static_cast<size_t>((r * l.C + c) * l.S + i); };
    for (int64_t r = 0; r < l.N; ++r)
      for (int64_t i = 0; i < l.S; ++i) s += vx[at(r, i)];
    const long double m = s / n;
    for (int64_t r = 0; r < l.N; ++r)
      for (int64_t i = 0; i < l.S; ++i) {
        sq += (vx[at(r, i)] - m) * (vx[at(r, i)] - m);
        sdy += vdy[at(r, i)];
        sdxm += vdy[at(r, i)] * (vx[at(r, i)] - static_cast<long double>(got_mean[static_cast<size_t>(c)]));
      }
    const size_t k = static_cast<size_t>(c);
    EXPECT_NEAR(got_mean[k], static_cast<double>(m), tol * 4) << "mean, channel " << c;
    EXPECT_NEAR(got_var[k], static_cast<double>(sq / n), tol * 4) << "variance, channel " << c;
    EXPECT_NEAR(got_sdy[k], static_cast<double>(sdy), tol * n) << "sum_dy, channel " << c;
    EXPECT_NEAR(got_sdxm[k], static_cast<double>(sdxm), tol * n) << "sum_dy_xmu, channel " << c;
    EXPECT_NEAR(got_sums[k], 0.5 + static_cast<double>(sdy), tol * n * 4) << "sum_channels, channel " << c;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, CpuReductions,
                         ::testing::Combine(::testing::Values(DType::Float32, DType::Float64),
                                            ::testing::Values(Layout{64, 5, 1}, Layout{3, 4, 7}, Layout{2, 3, 8},
                                                              Layout{5, 2, 9}, Layout{32, 8, 1024},
                                                              Layout{1, 3, 10007})));

}  // namespace
}  // namespace dpv
