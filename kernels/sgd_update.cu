#include "kernels/common.cuh"
#include "kernels/math/elementwise.h"
#include "kernels/sgd_update.h"

namespace dpv::kernels {
namespace {

// Arithmetic in T, as torch.optim.SGD's foreach/for-loop paths compute in the parameter dtype.
template <typename T>
__global__ void sgd_update_kernel(T* __restrict__ param, const T* __restrict__ grad, T* __restrict__ buf, int64_t n,
                                  T lr, T momentum, T weight_decay, bool use_momentum, bool first_step) {
  detail::for_each_index(n, [&](int64_t i) {
    math::sgd_update<T>(param[i], grad[i], use_momentum ? buf + i : nullptr, lr, momentum, weight_decay, first_step);
  });
}

template <typename T>
int launch(T* param, const T* grad, T* buf, int64_t n, double lr, double momentum, double weight_decay, bool first_step,
           void* stream) {
  if (n <= 0) return 0;
  const bool use_momentum = momentum != 0.0 && buf != nullptr;
  detail::clear_earlier_error();
  sgd_update_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(
      param, grad, buf, n, static_cast<T>(lr), static_cast<T>(momentum), static_cast<T>(weight_decay), use_momentum,
      first_step);
  return detail::launch_status();
}

}  // namespace

int sgd_update(float* param, const float* grad, float* momentum_buf, int64_t n, double lr, double momentum,
               double weight_decay, bool first_step, void* stream) {
  return launch(param, grad, momentum_buf, n, lr, momentum, weight_decay, first_step, stream);
}
int sgd_update(double* param, const double* grad, double* momentum_buf, int64_t n, double lr, double momentum,
               double weight_decay, bool first_step, void* stream) {
  return launch(param, grad, momentum_buf, n, lr, momentum, weight_decay, first_step, stream);
}

}  // namespace dpv::kernels
