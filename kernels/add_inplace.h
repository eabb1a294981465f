#pragma once
// dst[i] += src[i] for i in [0, n): gradient accumulation, and the reduction kernel of the
// peer-copy collectives (reduce-add of virtual devices sharing one GPU).
#include "kernels/launch.h"

namespace dpv::kernels {
int add_inplace(float* dst, const float* src, int64_t n, void* stream);
int add_inplace(double* dst, const double* src, int64_t n, void* stream);
int add_inplace(int64_t* dst, const int64_t* src, int64_t n, void* stream);
}  // namespace dpv::kernels
