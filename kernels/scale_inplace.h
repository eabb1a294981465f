#pragma once
// x[i] *= alpha for i in [0, n).
#include "kernels/launch.h"

namespace dpv::kernels {
int scale_inplace(float* x, int64_t n, double alpha, void* stream);
int scale_inplace(double* x, int64_t n, double alpha, void* stream);
}  // namespace dpv::kernels
