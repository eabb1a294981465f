// Backend's default BatchNorm + ReLU: the unfused ops, run in place on the output so that no
// temporary is needed. What a backend without fused kernels (CUDA today) runs.
#include "engine/backend.h"

namespace dpv {

void Backend::bn_normalize_relu(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                                const Tensor& beta, Tensor& y, int64_t N, int64_t C, int64_t S) {
  bn_normalize(x, mean, invstd, gamma, beta, y, N, C, S);
  relu_forward(y, y);  // element-wise: in place is safe
}

void Backend::bn_relu_backward(const Tensor& dy, const Tensor& y, const Tensor& x, const Tensor& mean,
                               const Tensor& invstd, const Tensor& gamma, Tensor& sum_dy, Tensor& sum_dy_xmu,
                               double count, Tensor& dx, int64_t N, int64_t C, int64_t S) {
  relu_backward(y, dy, dx);  // dx holds ReLU's input gradient first, then BatchNorm's, element by element
  bn_backward_reduce(dx, x, mean, sum_dy, sum_dy_xmu, N, C, S);
  bn_backward_elemt(dx, x, mean, invstd, gamma, sum_dy, sum_dy_xmu, count, dx, N, C, S);
}

}  // namespace dpv
