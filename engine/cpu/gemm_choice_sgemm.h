#pragma once
// A float32 product with a given library, and the library the chooser (gemm_choice.h) picks for a
// product's shape. Private to the CPU backend.
#include <cstdint>

#include "engine/core_backends.h"

namespace dpv::cpu {

// Row-major c[rows, cols] = alpha * op(a) @ op(b) + beta * c, as cblas_sgemm(CblasRowMajor, ...).
void run_sgemm(CpuGemmLibrary library, bool ta, bool tb, int64_t rows, int64_t cols, int64_t inner, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The library for a float32 product of `shape` on these operands: the remembered choice on the hot
// path (no lock, no allocation); the first product of a shape is timed with both libraries on its
// real operands, into a scratch output, so the caller's c is not touched before its product.
CpuGemmLibrary sgemm_library(const CpuGemmShape& shape, const float* a, int64_t lda, const float* b, int64_t ldb);

// Defined in cpu_backend.cpp, the one file compiled knowing whether the build has oneDNN: oneDNN's
// sgemm, or a dpv::Error in a build without it (the chooser never picks it there).
void onednn_sgemm_if_built(bool ta, bool tb, int64_t rows, int64_t cols, int64_t inner, float alpha, const float* a,
                           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace dpv::cpu
