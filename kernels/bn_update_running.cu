#include "kernels/bn_update_running.h"
#include "kernels/common.cuh"

namespace dpv::kernels {
namespace {

template <typename T>
__global__ void bn_update_running_kernel(const T* mean, const T* var_b, double bessel, double momentum,
                                         T* running_mean, T* running_var, int64_t C) {
  for (int64_t c = detail::global_thread(); c < C; c += detail::grid_threads()) {
    running_mean[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(running_mean[c]) +
                                     momentum * static_cast<double>(mean[c]));
    running_var[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(running_var[c]) +
                                    momentum * static_cast<double>(var_b[c]) * bessel);
  }
}

template <typename T>
int launch(const T* mean, const T* var_b, double n, double momentum, T* running_mean, T* running_var, int64_t C,
           void* stream) {
  if (C <= 0) return 0;
  const double bessel = n / (n - 1.0);
  bn_update_running_kernel<T><<<detail::grid_for(C), detail::kThreads, 0, detail::as_stream(stream)>>>(
      mean, var_b, bessel, momentum, running_mean, running_var, C);
  return detail::launch_status();
}

}  // namespace

int bn_update_running(const float* mean, const float* var_b, double n, double momentum, float* running_mean,
                      float* running_var, int64_t C, void* stream) {
  return launch(mean, var_b, n, momentum, running_mean, running_var, C, stream);
}
int bn_update_running(const double* mean, const double* var_b, double n, double momentum, double* running_mean,
                      double* running_var, int64_t C, void* stream) {
  return launch(mean, var_b, n, momentum, running_mean, running_var, C, stream);
}

}  // namespace dpv::kernels
