#include "engine/cpu/gemm_choice_sgemm.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "engine/cpu/gemm_choice.h"
#include "engine/error.h"
#include "engine/tensor.h"

namespace dpv::cpu {

void run_sgemm(CpuGemmLibrary library, bool ta, bool tb, int64_t rows, int64_t cols, int64_t inner, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (library == CpuGemmLibrary::Onednn) {
    onednn_sgemm_if_built(ta, tb, rows, cols, inner, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(rows),
              static_cast<int>(cols), static_cast<int>(inner), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
              beta, c, static_cast<int>(ldc));
}

CpuGemmLibrary sgemm_library(const CpuGemmShape& shape, const float* a, int64_t lda, const float* b, int64_t ldb) {
  GemmChooser& chooser = process_gemm_chooser();
  if (const std::optional<CpuGemmLibrary> known = chooser.chosen(shape)) return *known;
  std::vector<float> scratch(static_cast<size_t>(shape.rows * shape.cols));  // [rows, cols]
  // A small product is timed over several runs (about 2^18 multiply-adds in all, at most 64 runs),
  // so the clock's own cost and resolution do not decide.
  const double multiply_adds = static_cast<double>(shape.rows) * static_cast<double>(shape.cols) * static_cast<double>(shape.inner);
  const int runs = static_cast<int>(std::clamp(static_cast<double>(1 << 18) / multiply_adds, 1.0, 64.0));
  return chooser.choose(shape, [&](CpuGemmLibrary library) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < runs; ++r)
      run_sgemm(library, shape.trans_a, shape.trans_b, shape.rows, shape.cols, shape.inner, 1.0f, a, lda, b, ldb, 0.0f,
                scratch.data(), shape.cols);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / runs;
  });
}

}  // namespace dpv::cpu

namespace dpv {

void CpuGemm::run_with(CpuGemmLibrary library, bool trans_a, bool trans_b, int64_t rows, int64_t cols, int64_t inner,
                       const Tensor& a, const Tensor& b, Tensor& c) {
  // This object's backend set OpenBLAS to one thread when it was made; oneDNN sets its own per call.
  check(c.dtype() == DType::Float32, "CpuGemm::run_with multiplies float32 products only (an internal error)");
  cpu::run_sgemm(library, trans_a, trans_b, rows, cols, inner, 1.0f, a.data<float>(), trans_a ? rows : inner,
                 b.data<float>(), trans_b ? inner : cols, 0.0f, c.data<float>(), cols);
}

}  // namespace dpv
