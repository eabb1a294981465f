#pragma once
// BatchNorm's loops on the CPU backend (see Backend's bn_* ops for the contracts), including the
// forms fused with a following ReLU: one pass over memory each way instead of two.
#include <cstdint>

#include "engine/tensor.h"

namespace dpv::cpu {

void bn_stats(const Tensor& x, Tensor& mean, Tensor& var_b, int64_t N, int64_t C, int64_t S);
// y = (x - mean) * invstd * gamma + beta, then relu(y) when `relu` is set.
void bn_normalize(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma, const Tensor& beta,
                  Tensor& y, int64_t N, int64_t C, int64_t S, bool relu);
// relu_y: null, or the output of a ReLU fused into the forward: dy is then masked where relu_y <= 0.
void bn_backward_reduce(const Tensor& dy, const Tensor* relu_y, const Tensor& x, const Tensor& mean, Tensor& sum_dy,
                        Tensor& sum_dy_xmu, int64_t N, int64_t C, int64_t S);
void bn_backward_elemt(const Tensor& dy, const Tensor* relu_y, const Tensor& x, const Tensor& mean,
                       const Tensor& invstd, const Tensor& gamma, const Tensor& sum_dy, const Tensor& sum_dy_xmu,
                       double count, Tensor& dx, int64_t N, int64_t C, int64_t S);
// bn_backward_reduce then bn_backward_elemt (same numbers), for a caller that needs nothing in
// between (no SyncBatchNorm all-reduce): [N, C, S] inputs run channel by channel, each channel's
// two passes back to back while its values are in cache.
void bn_backward(const Tensor& dy, const Tensor* relu_y, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                 const Tensor& gamma, Tensor& sum_dy, Tensor& sum_dy_xmu, double count, Tensor& dx, int64_t N,
                 int64_t C, int64_t S);

}  // namespace dpv::cpu
