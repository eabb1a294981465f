#pragma once
// Per-element and per-channel math of BatchNorm, shared by the CPU backend and the kernels.
// `Acc` is the precision of the arithmetic: the kernels use double (batch_norm_elemt's accscalar),
// the CPU backend the tensor's own dtype (as PyTorch's CPU kernels do).
#include <cmath>

#include "kernels/math/hd.h"

namespace dpv::kernels::math {

// The CUDA form of the forward: y = (x - mean) * invstd * gamma + beta.
template <typename Acc>
DPV_HD inline Acc bn_normalize(Acc x, Acc mean, Acc invstd, Acc gamma, Acc beta) {
  return (x - mean) * invstd * gamma + beta;
}

// The CPU form: PyTorch's CPU kernel folds the affine transform per channel into
// y = x * alpha + shift, alpha = invstd * gamma, shift = beta - mean * alpha.
template <typename Acc>
struct BnAffine {
  Acc alpha, shift;
};
template <typename Acc>
DPV_HD inline BnAffine<Acc> bn_fold_affine(Acc mean, Acc invstd, Acc gamma, Acc beta) {
  const Acc alpha = invstd * gamma;
  return {alpha, beta - mean * alpha};
}
template <typename Acc>
DPV_HD inline Acc bn_apply_affine(Acc x, BnAffine<Acc> a) {
  return x * a.alpha + a.shift;
}

// 1 / sqrt(var + eps), the inverse standard deviation of a channel.
template <typename Acc>
DPV_HD inline Acc bn_invstd(Acc var_b, Acc eps) {
  return Acc(1) / std::sqrt(var_b + eps);
}

// running = momentum * batch_value + (1 - momentum) * running; the variance enters unbiased,
// var_b * n / (n - 1) for n samples.
template <typename Acc>
DPV_HD inline Acc bn_running_update(Acc running, Acc batch_value, Acc momentum) {
  return momentum * batch_value + (Acc(1) - momentum) * running;
}
template <typename Acc>
DPV_HD inline Acc bn_unbiased_var(Acc var_b, Acc n) {
  return var_b * n / (n - Acc(1));
}

// Backward, per channel (batch_norm_backward_elemt): with n the total count,
//   dx = (dy - sum_dy / n - (x - mean) * invstd^2 * sum_dy_xmu / n) * invstd * gamma
// The three per-channel terms are computed once per channel, then applied per element.
template <typename Acc>
struct BnBackwardTerms {
  Acc mean_dy;  // sum_dy / n
  Acc proj;     // sum_dy_xmu / n * invstd^2
  Acc scale;    // invstd * gamma
};
template <typename Acc>
DPV_HD inline BnBackwardTerms<Acc> bn_backward_terms(Acc sum_dy, Acc sum_dy_xmu, Acc count, Acc invstd, Acc gamma) {
  return {sum_dy / count, sum_dy_xmu / count * invstd * invstd, invstd * gamma};
}
template <typename Acc>
DPV_HD inline Acc bn_backward_elemt(Acc dy, Acc x, Acc mean, BnBackwardTerms<Acc> t) {
  return (dy - t.mean_dy - (x - mean) * t.proj) * t.scale;
}

}  // namespace dpv::kernels::math
