// Backend's default BatchNorm + ReLU: the unfused ops (the forward's ReLU in place on the output).
// What a backend without fused kernels (CUDA today) runs.
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
  // ReLU's input gradient in a temporary: the element-wise kernels may declare their input and
  // output __restrict__, so dx cannot double as it.
  Tensor g = Tensor::empty(dy.shape(), dy.dtype(), dy.device_ptr());
  relu_backward(y, dy, g);
  bn_backward_reduce(g, x, mean, sum_dy, sum_dy_xmu, N, C, S);
  bn_backward_elemt(g, x, mean, invstd, gamma, sum_dy, sum_dy_xmu, count, dx, N, C, S);
}

}  // namespace dpv
