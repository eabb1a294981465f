#pragma once
// ReLU: y = max(x, 0); backward dx = dy where y > 0 else 0 (PyTorch's threshold_backward on the output).
#include "kernels/launch.h"

namespace dpv::kernels {
int relu_forward(const float* x, float* y, int64_t n, void* stream);
int relu_forward(const double* x, double* y, int64_t n, void* stream);
int relu_backward(const float* y, const float* dy, float* dx, int64_t n, void* stream);
int relu_backward(const double* y, const double* dy, double* dx, int64_t n, void* stream);
}  // namespace dpv::kernels
