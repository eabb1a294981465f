#pragma once
// dst [B, A, S] = src [A, B, S] with the first two axes swapped (around the conv GEMMs).
#include "kernels/launch.h"

namespace dpv::kernels {
int permute_nos(const float* src, float* dst, int64_t A, int64_t B, int64_t S, void* stream);
int permute_nos(const double* src, double* dst, int64_t A, int64_t B, int64_t S, void* stream);
}  // namespace dpv::kernels
