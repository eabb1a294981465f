#pragma once
// Batch-norm statistics of x [N, C, S] per channel c: mean[c] and the biased variance var_b[c],
// two passes (mean, then the sum of squared deviations), both accumulated in double, as the CPU
// backend and PyTorch's CPU kernel do.
#include "kernels/launch.h"

namespace dpv::kernels {
int bn_stats(const float* x, float* mean, float* var_b, int64_t N, int64_t C, int64_t S, void* stream);
int bn_stats(const double* x, double* mean, double* var_b, int64_t N, int64_t C, int64_t S, void* stream);
}  // namespace dpv::kernels
