#pragma once
// y[N, C, S] = (x - mean[c]) * invstd[c] * gamma[c] + beta[c]  (batch_norm_elemt).
// gamma and beta may be null (affine=False): 1 and 0.
#include "kernels/launch.h"

namespace dpv::kernels {
int bn_normalize(const float* x, const float* mean, const float* invstd, const float* gamma, const float* beta,
                 float* y, int64_t N, int64_t C, int64_t S, void* stream);
int bn_normalize(const double* x, const double* mean, const double* invstd, const double* gamma,
                 const double* beta, double* y, int64_t N, int64_t C, int64_t S, void* stream);
}  // namespace dpv::kernels
