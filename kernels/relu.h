#pragma once
// ReLU: y = max(x, 0) with relu(nan) = nan; backward dx = 0 where y <= 0 else dy (PyTorch's
// threshold_backward on the output). Per element: kernels/math/elementwise.h.
#include "kernels/launch.h"

namespace dpv::kernels {
int relu_forward(const float* x, float* y, int64_t n, void* stream);
int relu_forward(const double* x, double* y, int64_t n, void* stream);
int relu_backward(const float* y, const float* dy, float* dx, int64_t n, void* stream);
int relu_backward(const double* y, const double* dy, double* dx, int64_t n, void* stream);
}  // namespace dpv::kernels
