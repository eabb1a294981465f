#pragma once
// invstd[c] = 1 / sqrt(var_b[c] + eps) for c in [0, C).
#include "kernels/launch.h"

namespace dpv::kernels {
int bn_invstd(const float* var_b, double eps, float* invstd, int64_t C, void* stream);
int bn_invstd(const double* var_b, double eps, double* invstd, int64_t C, void* stream);
}  // namespace dpv::kernels
