// The CPU backend's matrix product against a plain triple loop in long double, for every transpose
// pair, alpha/beta, both dtypes, and shapes on both sides of the size below which float32 products
// stay on OpenBLAS untimed (larger ones run with the library timed faster for their shape; each
// library alone is checked in gemm_choice_test.cpp).
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

struct GemmCase {
  int64_t rows, cols, inner;
};

Tensor random(const Shape& shape, DType dtype, Rng& rng) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (double& x : v) x = rng.uniform(-1.0, 1.0);
  return Tensor::from_doubles(shape, dtype, v);
}

class CpuGemm : public ::testing::TestWithParam<std::tuple<DType, GemmCase>> {};

TEST_P(CpuGemm, MatchesATripleLoop) {
  const auto [dtype, g] = GetParam();
  auto backend = make_cpu_backend();
  Rng rng(23);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + std::to_string(g.rows) + "x" + std::to_string(g.cols) +
                   "x" + std::to_string(g.inner) + (ta ? " trans_a" : "") + (tb ? " trans_b" : ""));
      const Tensor a = random(ta ? Shape{g.inner, g.rows} : Shape{g.rows, g.inner}, dtype, rng);
      const Tensor b = random(tb ? Shape{g.cols, g.inner} : Shape{g.inner, g.cols}, dtype, rng);
      Tensor c = random({g.rows, g.cols}, dtype, rng);
      const std::vector<double> va = a.to_doubles(), vb = b.to_doubles(), vc = c.to_doubles();
      const double alpha = 0.75, beta = 0.5;
      backend->gemm(ta, tb, g.rows, g.cols, g.inner, alpha, a, b, beta, c);
      const std::vector<double> got = c.to_doubles();
      const double tol = (dtype == DType::Float32 ? 1e-6 : 1e-14) * static_cast<double>(g.inner);
      for (int64_t i = 0; i < g.rows; ++i)
        for (int64_t j = 0; j < g.cols; ++j) {
          long double acc = 0;
          for (int64_t k = 0; k < g.inner; ++k) {
            const double x = va[static_cast<size_t>(ta ? k * g.rows + i : i * g.inner + k)];
            const double y = vb[static_cast<size_t>(tb ? j * g.inner + k : k * g.cols + j)];
            acc += static_cast<long double>(x) * y;
          }
          const size_t at = static_cast<size_t>(i * g.cols + j);
          const double want = static_cast<double>(alpha * acc + beta * static_cast<long double>(vc[at]));
          ASSERT_NEAR(got[at], want, tol) << "at [" << i << ", " << j << "]";
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuGemm,
                         ::testing::Combine(::testing::Values(DType::Float32, DType::Float64),
                                            ::testing::Values(GemmCase{3, 2, 10},       // tiny: OpenBLAS, untimed
                                                              GemmCase{64, 10, 256},    // a classifier head
                                                              GemmCase{64, 96, 200},    // float32: timed
                                                              GemmCase{130, 67, 45})));

}  // namespace
}  // namespace dpv
