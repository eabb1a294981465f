#pragma once
// Per channel of dy, x [N, C, S]: sum_dy[c] = sum dy;  sum_dy_xmu[c] = sum dy * (x - mean[c]),
// accumulated in double (batch_norm_backward_reduce).
#include "kernels/launch.h"

namespace dpv::kernels {
int bn_backward_reduce(const float* dy, const float* x, const float* mean, float* sum_dy, float* sum_dy_xmu,
                       int64_t N, int64_t C, int64_t S, void* stream);
int bn_backward_reduce(const double* dy, const double* x, const double* mean, double* sum_dy, double* sum_dy_xmu,
                       int64_t N, int64_t C, int64_t S, void* stream);
}  // namespace dpv::kernels
