#pragma once
// The row-major -> column-major argument mapping of the CUDA backend's GEMM, as a pure function
// tested on the CPU against a naive GEMM (tests/kernel_math).
//
// Row-major C[M,N] = op(A) op(B) is, read as column-major, C^T[N,M] = op(B)^T op(A)^T: cuBLAS gets
// B first and A second, each row-major matrix read as its own column-major transpose, and the
// transpose flags stay as they are.
#include <cstdint>

#include "kernels/math/hd.h"

namespace dpv::kernels::math {

struct ColumnMajorGemm {
  bool trans_first, trans_second;  // op of the first (B) and second (A) operand
  int64_t m, n, k;                 // column-major C is m x n: m = N, n = M
  int64_t ld_first, ld_second, ldc;
};

// Every leading dimension is at least 1 (cuBLAS rejects 0 even when a size is 0).
DPV_HD inline ColumnMajorGemm column_major_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K) {
  const auto at_least_1 = [](int64_t v) { return v < 1 ? int64_t{1} : v; };
  return {trans_b, trans_a, N, M, K, at_least_1(trans_b ? K : N), at_least_1(trans_a ? M : K), at_least_1(N)};
}

}  // namespace dpv::kernels::math
