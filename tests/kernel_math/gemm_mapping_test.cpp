// kernels/math/gemm_mapping.h on the CPU: the row-major -> column-major argument mapping of the
// CUDA backend's cuBLAS call, run through a naive column-major GEMM with cuBLAS's semantics and
// compared with a naive row-major GEMM, for every transpose and every degenerate size.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/math/gemm_mapping.h"

namespace dpv::kernels::math {
namespace {

// cublasDgemm on host memory: C (m x n, column-major) = alpha * op(X) op(Y) + beta * C, with
// beta = 0 not reading C. Checks the leading dimensions as cuBLAS does (CUBLAS_STATUS_INVALID_VALUE).
::testing::AssertionResult column_major_gemm_naive(bool tx, bool ty, int64_t m, int64_t n, int64_t k, double alpha,
                                                   const double* x, int64_t ldx, const double* y, int64_t ldy,
                                                   double beta, double* c, int64_t ldc) {
  if (ldx < std::max<int64_t>(1, tx ? k : m)) return ::testing::AssertionFailure() << "ld of the first operand " << ldx;
  if (ldy < std::max<int64_t>(1, ty ? n : k)) return ::testing::AssertionFailure() << "ld of the second operand " << ldy;
  if (ldc < std::max<int64_t>(1, m)) return ::testing::AssertionFailure() << "ldc " << ldc;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double xv = tx ? x[p + i * ldx] : x[i + p * ldx];  // op(X)[i, p]
        const double yv = ty ? y[j + p * ldy] : y[p + j * ldy];  // op(Y)[p, j]
        acc += xv * yv;
      }
      double& out = c[i + j * ldc];
      out = alpha * acc + (beta == 0 ? 0.0 : beta * out);
    }
  return ::testing::AssertionSuccess();
}

// Row-major C[M,N] = alpha * op(A) op(B) + beta * C, A [M,K] or [K,M], B [K,N] or [N,K].
void row_major_gemm_naive(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* a,
                          const double* b, double beta, double* c) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < K; ++p) acc += (ta ? a[p * M + i] : a[i * K + p]) * (tb ? b[j * K + p] : b[p * N + j]);
      c[i * N + j] = alpha * acc + (beta == 0 ? 0.0 : beta * c[i * N + j]);
    }
}

std::vector<double> values(int64_t n, double seed) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = seed + 0.25 * static_cast<double>((i * 7) % 11) - 1.0;
  return v;
}

TEST(GemmMapping, MatchesNaiveRowMajorGemmForEveryTransposeAndDegenerateSize) {
  const int64_t sizes[] = {0, 1, 2, 3, 5};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t M : sizes)
        for (int64_t N : sizes)
          for (int64_t K : sizes)
            for (double beta : {0.0, 0.5}) {
              SCOPED_TRACE(::testing::Message() << "trans_a " << ta << " trans_b " << tb << " M " << M << " N " << N
                                                << " K " << K << " beta " << beta);
              const std::vector<double> a = values(M * K, 0.3), b = values(K * N, -0.7);
              std::vector<double> want = values(M * N, 2.0), got = want;
              row_major_gemm_naive(ta, tb, M, N, K, 1.5, a.data(), b.data(), beta, want.data());
              const ColumnMajorGemm g = column_major_gemm(ta, tb, M, N, K);
              EXPECT_EQ(g.m, N);
              EXPECT_EQ(g.n, M);
              EXPECT_EQ(g.k, K);
              // cuBLAS gets B first and A second.
              ASSERT_TRUE(column_major_gemm_naive(g.trans_first, g.trans_second, g.m, g.n, g.k, 1.5, b.data(),
                                                  g.ld_first, a.data(), g.ld_second, beta, got.data(), g.ldc));
              EXPECT_EQ(got, want);
            }
}

TEST(GemmMapping, LeadingDimensionsAreTheRowMajorRowLengths) {
  const ColumnMajorGemm g = column_major_gemm(false, true, 37, 53, 129);  // Linear forward: x [M,K] @ W^T
  EXPECT_FALSE(g.trans_second);
  EXPECT_TRUE(g.trans_first);
  EXPECT_EQ(g.ld_first, 129);  // W [N, K]: rows of K
  EXPECT_EQ(g.ld_second, 129);  // x [M, K]
  EXPECT_EQ(g.ldc, 53);
  const ColumnMajorGemm t = column_major_gemm(true, false, 37, 53, 129);  // dW = dy^T @ x
  EXPECT_EQ(t.ld_second, 37);
  EXPECT_EQ(t.ld_first, 53);
}

}  // namespace
}  // namespace dpv::kernels::math
