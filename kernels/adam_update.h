#pragma once
// torch.optim.Adam / AdamW for one parameter, element-wise (kernels/math/adam.h): updates param,
// exp_avg and exp_avg_sq in place with the step's scalars, computed on the host as Python does.
#include "kernels/launch.h"
#include "kernels/math/adam.h"

namespace dpv::kernels {
int adam_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                const math::AdamStep& step, void* stream);
int adam_update(double* param, const double* grad, double* exp_avg, double* exp_avg_sq, int64_t n,
                const math::AdamStep& step, void* stream);
}  // namespace dpv::kernels
