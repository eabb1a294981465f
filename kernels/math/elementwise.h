#pragma once
// Per-element math of ReLU, scaling and torch.optim.SGD, shared by the CPU backend and the kernels.
#include "kernels/math/hd.h"

namespace dpv::kernels::math {

// relu (clamp_min(x, 0)) propagates NaN, as PyTorch does: relu(nan) = nan (nan <= 0 is false).
// Written as one comparison so that CPU loops over it vectorise.
template <typename T>
DPV_HD inline T relu(T x) {
  return x <= T(0) ? T(0) : x;
}

// threshold_backward on the output: zero where y <= 0, else dy (a NaN output passes dy through).
template <typename T>
DPV_HD inline T relu_backward(T y, T dy) {
  return y <= T(0) ? T(0) : dy;
}

// x * alpha, with alpha = 0 writing 0 (the beta = 0 rule of BLAS: old values, NaN included, are
// not read), so a GEMM with K = 0 and beta = 0 gives zeros.
template <typename T>
DPV_HD inline T scale(T x, T alpha) {
  return alpha == T(0) ? T(0) : x * alpha;
}

// torch.optim.SGD (dampening 0, no nesterov), arithmetic in the parameter's dtype:
//   d = grad (+ weight_decay * param when weight_decay != 0)
//   buf = first_step ? d : momentum * buf + d;  d = buf        (when momentum != 0)
//   param -= lr * d
// `buf` is null without momentum.
template <typename T>
DPV_HD inline void sgd_update(T& param, T grad, T* buf, T lr, T momentum, T weight_decay, bool first_step) {
  T d = grad;
  if (weight_decay != T(0)) d += weight_decay * param;
  if (buf) {
    const T b = first_step ? d : momentum * *buf + d;
    *buf = b;
    d = b;
  }
  param -= lr * d;
}

}  // namespace dpv::kernels::math
