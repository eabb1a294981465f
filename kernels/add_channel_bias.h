#pragma once
// y[N, C, S] += bias[C], broadcast over N and S (Linear: S = 1; Conv2d: S = H*W).
#include "kernels/launch.h"

namespace dpv::kernels {
int add_channel_bias(float* y, const float* bias, int64_t N, int64_t C, int64_t S, void* stream);
int add_channel_bias(double* y, const double* bias, int64_t N, int64_t C, int64_t S, void* stream);
}  // namespace dpv::kernels
