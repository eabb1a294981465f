#pragma once
// out[C] (+)= sum over N and S of dy[N, C, S] (the bias gradient); accumulate adds to out.
#include "kernels/launch.h"

namespace dpv::kernels {
int sum_channels(const float* dy, float* out, int64_t N, int64_t C, int64_t S, bool accumulate, void* stream);
int sum_channels(const double* dy, double* out, int64_t N, int64_t C, int64_t S, bool accumulate, void* stream);
}  // namespace dpv::kernels
