#pragma once
// x[i] = value for i in [0, n).
#include "kernels/launch.h"

namespace dpv::kernels {
int fill(float* x, int64_t n, double value, void* stream);
int fill(double* x, int64_t n, double value, void* stream);
int fill(int64_t* x, int64_t n, double value, void* stream);
}  // namespace dpv::kernels
