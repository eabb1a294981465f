#pragma once
// dx[N, C, S] = (dy - sum_dy/n - (x - mean) * invstd^2 * sum_dy_xmu/n) * invstd * gamma, n = count
// (the total count over all ranks under SyncBatchNorm). gamma may be null (1).
#include "kernels/launch.h"

namespace dpv::kernels {
int bn_backward_elemt(const float* dy, const float* x, const float* mean, const float* invstd, const float* gamma,
                      const float* sum_dy, const float* sum_dy_xmu, double count, float* dx, int64_t N, int64_t C,
                      int64_t S, void* stream);
int bn_backward_elemt(const double* dy, const double* x, const double* mean, const double* invstd,
                      const double* gamma, const double* sum_dy, const double* sum_dy_xmu, double count, double* dx,
                      int64_t N, int64_t C, int64_t S, void* stream);
}  // namespace dpv::kernels
