#include "kernels/addcmul_inplace.h"
#include "kernels/common.cuh"

namespace dpv::kernels {
namespace {

// The product is rounded before the sum (no fused multiply-add) so the result matches the CPU
// backend's bit for bit.
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }

template <typename T>
__global__ void addcmul_inplace_kernel(T* __restrict__ dst, const T* __restrict__ a, const T* __restrict__ b, int64_t n) {
  for (int64_t i = detail::global_thread(); i < n; i += detail::grid_threads()) dst[i] += mul_rn(a[i], b[i]);
}

template <typename T>
int launch(T* dst, const T* a, const T* b, int64_t n, void* stream) {
  if (n <= 0) return 0;
  detail::clear_earlier_error();
  addcmul_inplace_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(dst, a, b, n);
  return detail::launch_status();
}

}  // namespace

int addcmul_inplace(float* dst, const float* a, const float* b, int64_t n, void* stream) {
  return launch(dst, a, b, n, stream);
}
int addcmul_inplace(double* dst, const double* a, const double* b, int64_t n, void* stream) {
  return launch(dst, a, b, n, stream);
}

}  // namespace dpv::kernels
