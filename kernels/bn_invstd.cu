#include "kernels/bn_invstd.h"
#include "kernels/common.cuh"
#include "kernels/math/batchnorm.h"

namespace dpv::kernels {
namespace {

template <typename T>
__global__ void bn_invstd_kernel(const T* var_b, double eps, T* invstd, int64_t C) {
  detail::for_each_index(C, [&](int64_t c) { invstd[c] = static_cast<T>(math::bn_invstd<double>(var_b[c], eps)); });
}

template <typename T>
int launch(const T* var_b, double eps, T* invstd, int64_t C, void* stream) {
  if (C <= 0) return 0;
  detail::clear_earlier_error();
  bn_invstd_kernel<T><<<detail::grid_for(C), detail::kThreads, 0, detail::as_stream(stream)>>>(var_b, eps, invstd, C);
  return detail::launch_status();
}

}  // namespace

int bn_invstd(const float* var_b, double eps, float* invstd, int64_t C, void* stream) {
  return launch(var_b, eps, invstd, C, stream);
}
int bn_invstd(const double* var_b, double eps, double* invstd, int64_t C, void* stream) {
  return launch(var_b, eps, invstd, C, stream);
}

}  // namespace dpv::kernels
