#pragma once
// dst[i] += a[i] * b[i] for i in [0, n) (torch.addcmul_ with value 1): BatchNorm's weight
// gradient, sum(dy * (x - mean)) * invstd, accumulated without leaving the device.
#include "kernels/launch.h"

namespace dpv::kernels {
int addcmul_inplace(float* dst, const float* a, const float* b, int64_t n, void* stream);
int addcmul_inplace(double* dst, const double* a, const double* b, int64_t n, void* stream);
}  // namespace dpv::kernels
