#pragma once
// Per-element math of torch.optim.Adam and AdamW (PyTorch 1.13's single-tensor path, amsgrad and
// maximize off), shared by the CPU backend and the CUDA kernel. The scalars are computed once per
// parameter in double, as Python computes them (adam_scalars), then rounded to the parameter's dtype
// where PyTorch passes them to a tensor op; the tensor arithmetic below runs in T in adam.py's order:
//   AdamW:  param *= 1 - lr * weight_decay                      (param.mul_(1 - lr * wd))
//   Adam:   grad = grad + weight_decay * param                  (grad.add(param, alpha=wd))
//   exp_avg    = exp_avg * beta1 + (1 - beta1) * grad            (mul_(beta1).add_(grad, alpha=1-beta1))
//   exp_avg_sq = exp_avg_sq * beta2 + (1 - beta2) * grad * grad  (mul_(beta2).addcmul_(grad, grad, value=1-beta2))
//   denom = sqrt(exp_avg_sq) / sqrt(bias_correction2) + eps      ((exp_avg_sq.sqrt() / bc2_sqrt).add_(eps))
//   param = param + (-step_size) * exp_avg / denom               (param.addcdiv_(exp_avg, denom, value=-step_size))
#include <cmath>
#include <cstdint>

#include "kernels/math/hd.h"

namespace dpv::kernels::math {

// One Adam/AdamW step's hyper-parameters as the optimizer holds them (doubles, Python floats).
struct AdamStep {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // AdamW
  int64_t step = 1;                     // the parameter's step count after this step's increment
};

// The scalars of one step, already rounded to T where adam.py hands a Python float to a tensor op.
template <typename T>
struct AdamScalars {
  T beta1, one_minus_beta1, beta2, one_minus_beta2;
  T bias_correction2_sqrt;  // sqrt(1 - beta2^step)
  T eps;
  T neg_step_size;          // -lr / (1 - beta1^step)
  T weight_decay;           // Adam's L2 term (0 for AdamW)
  T decay_factor;           // AdamW's 1 - lr * weight_decay (1 for Adam)
  bool l2, decoupled;
};

// Host side, double precision, as Python: bias_correction1 = 1 - beta1 ** step, and so on.
template <typename T>
inline AdamScalars<T> adam_scalars(const AdamStep& s) {
  const double step = static_cast<double>(s.step);
  const double bias_correction1 = 1.0 - std::pow(s.beta1, step);
  const double bias_correction2 = 1.0 - std::pow(s.beta2, step);
  AdamScalars<T> out{};
  out.beta1 = static_cast<T>(s.beta1);
  out.one_minus_beta1 = static_cast<T>(1.0 - s.beta1);
  out.beta2 = static_cast<T>(s.beta2);
  out.one_minus_beta2 = static_cast<T>(1.0 - s.beta2);
  out.bias_correction2_sqrt = static_cast<T>(std::sqrt(bias_correction2));
  out.eps = static_cast<T>(s.eps);
  out.neg_step_size = static_cast<T>(-(s.lr / bias_correction1));
  out.decoupled = s.decoupled_weight_decay && s.weight_decay != 0.0;
  out.l2 = !s.decoupled_weight_decay && s.weight_decay != 0.0;
  out.weight_decay = static_cast<T>(out.l2 ? s.weight_decay : 0.0);
  out.decay_factor = static_cast<T>(out.decoupled ? 1.0 - s.lr * s.weight_decay : 1.0);
  return out;
}

template <typename T>
DPV_HD inline void adam_update(T& param, T grad, T& exp_avg, T& exp_avg_sq, const AdamScalars<T>& s) {
  if (s.decoupled) param = param * s.decay_factor;
  if (s.l2) grad = grad + s.weight_decay * param;
  exp_avg = exp_avg * s.beta1;
  exp_avg = exp_avg + s.one_minus_beta1 * grad;
  exp_avg_sq = exp_avg_sq * s.beta2;
  exp_avg_sq = exp_avg_sq + s.one_minus_beta2 * grad * grad;
  const T denom = std::sqrt(exp_avg_sq) / s.bias_correction2_sqrt + s.eps;
  param = param + s.neg_step_size * exp_avg / denom;
}

}  // namespace dpv::kernels::math
