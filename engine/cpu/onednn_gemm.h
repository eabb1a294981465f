#pragma once
// float32 matrix products through oneDNN's sgemm, one of the two libraries the CPU backend times
// per product shape (gemm_choice.h; float64 stays on OpenBLAS: oneDNN has no dgemm). Private to
// the CPU backend.
#include <cstdint>

namespace dpv::cpu {

// Row-major c[rows, cols] = alpha * op(a) @ op(b) + beta * c with leading dimensions lda, ldb, ldc,
// as cblas_sgemm(CblasRowMajor, ...). Throws dpv::Error if oneDNN refuses the arguments.
void onednn_sgemm(bool trans_a, bool trans_b, int64_t rows, int64_t cols, int64_t inner, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// oneDNN (OpenMP build) on the calling thread alone: each simulated device is one worker thread,
// and the OpenMP thread count is a per-thread setting, so every entry point calls this first.
void onednn_single_thread();

}  // namespace dpv::cpu
