#include "kernels/adam_update.h"
#include "kernels/common.cuh"

namespace dpv::kernels {
namespace {

// The scalars travel by value (a few dozen bytes of kernel parameters); arithmetic in T.
template <typename T>
__global__ void adam_update_kernel(T* __restrict__ param, const T* __restrict__ grad, T* __restrict__ exp_avg,
                                   T* __restrict__ exp_avg_sq, int64_t n, math::AdamScalars<T> scalars) {
  detail::for_each_index(n, [&](int64_t i) { math::adam_update<T>(param[i], grad[i], exp_avg[i], exp_avg_sq[i], scalars); });
}

template <typename T>
int launch(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, int64_t n, const math::AdamStep& step, void* stream) {
  if (n <= 0) return 0;
  detail::clear_earlier_error();
  adam_update_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(
      param, grad, exp_avg, exp_avg_sq, n, math::adam_scalars<T>(step));
  return detail::launch_status();
}

}  // namespace

int adam_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                const math::AdamStep& step, void* stream) {
  return launch(param, grad, exp_avg, exp_avg_sq, n, step, stream);
}
int adam_update(double* param, const double* grad, double* exp_avg, double* exp_avg_sq, int64_t n,
                const math::AdamStep& step, void* stream) {
  return launch(param, grad, exp_avg, exp_avg_sq, n, step, stream);
}

}  // namespace dpv::kernels
