#include "engine/cpu/onednn_gemm.h"

#include <omp.h>

#include <dnnl.h>
#include <string>

#include "engine/error.h"

namespace dpv::cpu {

void onednn_single_thread() { omp_set_num_threads(1); }

void onednn_sgemm(bool trans_a, bool trans_b, int64_t rows, int64_t cols, int64_t inner, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  onednn_single_thread();
  // dnnl_sgemm takes row-major operands, as the engine's tensors are.
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', rows, cols, inner, alpha, a, lda,
                                          b, ldb, beta, c, ldc);
  if (status != dnnl_success)
    throw Error("oneDNN sgemm failed (status " + std::to_string(static_cast<int>(status)) + ") for a " +
                std::to_string(rows) + "x" + std::to_string(inner) + " by " + std::to_string(inner) + "x" +
                std::to_string(cols) + " product");
}

}  // namespace dpv::cpu
