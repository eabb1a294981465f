#pragma once
// torch.optim.SGD for one parameter (dampening 0, no nesterov), element-wise:
//   d = grad + weight_decay * param
//   momentum != 0: buf = first_step ? d : momentum * buf + d;  param -= lr * buf
//   momentum == 0: param -= lr * d  (buf untouched; may be null)
#include "kernels/launch.h"

namespace dpv::kernels {
int sgd_update(float* param, const float* grad, float* momentum_buf, int64_t n, double lr, double momentum,
               double weight_decay, bool first_step, void* stream);
int sgd_update(double* param, const double* grad, double* momentum_buf, int64_t n, double lr, double momentum,
               double weight_decay, bool first_step, void* stream);
}  // namespace dpv::kernels
