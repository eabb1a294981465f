#pragma once
// Plain BatchNorm's running statistics (train mode), per channel:
//   running_mean = (1-m)*running_mean + m*mean;  running_var = (1-m)*running_var + m*var_b*n/(n-1)
// (the unbiased variance of the n elements per channel).
#include "kernels/launch.h"

namespace dpv::kernels {
int bn_update_running(const float* mean, const float* var_b, double n, double momentum, float* running_mean,
                      float* running_var, int64_t C, void* stream);
int bn_update_running(const double* mean, const double* var_b, double n, double momentum, double* running_mean,
                      double* running_var, int64_t C, void* stream);
}  // namespace dpv::kernels
