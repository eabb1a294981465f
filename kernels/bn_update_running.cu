#include "kernels/bn_update_running.h"
#include "kernels/common.cuh"
#include "kernels/math/batchnorm.h"

namespace dpv::kernels {
namespace {

template <typename T>
__global__ void bn_update_running_kernel(const T* mean, const T* var_b, double n, double momentum, T* running_mean,
                                         T* running_var, int64_t C) {
  detail::for_each_index(C, [&](int64_t c) {
    running_mean[c] = static_cast<T>(math::bn_running_update<double>(running_mean[c], mean[c], momentum));
    running_var[c] =
        static_cast<T>(math::bn_running_update<double>(running_var[c], math::bn_unbiased_var<double>(var_b[c], n), momentum));
  });
}

template <typename T>
int launch(const T* mean, const T* var_b, double n, double momentum, T* running_mean, T* running_var, int64_t C,
           void* stream) {
  if (C <= 0) return 0;
  detail::clear_earlier_error();
  bn_update_running_kernel<T><<<detail::grid_for(C), detail::kThreads, 0, detail::as_stream(stream)>>>(
      mean, var_b, n, momentum, running_mean, running_var, C);
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
