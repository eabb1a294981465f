#include "kernels/add_inplace.h"
#include "kernels/common.cuh"

namespace dpv::kernels {
namespace {

template <typename T>
__global__ void add_inplace_kernel(T* __restrict__ dst, const T* __restrict__ src, int64_t n) {
  for (int64_t i = detail::global_thread(); i < n; i += detail::grid_threads()) dst[i] += src[i];
}

// float32 fast path: four elements per 16-byte access when both pointers are 16-byte aligned.
__global__ void add_inplace_vec4_kernel(float4* __restrict__ dst, const float4* __restrict__ src, int64_t n4) {
  for (int64_t i = detail::global_thread(); i < n4; i += detail::grid_threads()) {
    float4 a = dst[i];
    const float4 b = src[i];
    a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w;
    dst[i] = a;
  }
}

template <typename T>
int launch(T* dst, const T* src, int64_t n, void* stream) {
  if (n <= 0) return 0;
  detail::clear_earlier_error();
  add_inplace_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(dst, src, n);
  return detail::launch_status();
}

}  // namespace

int add_inplace(float* dst, const float* src, int64_t n, void* stream) {
  const bool aligned = (reinterpret_cast<uintptr_t>(dst) % 16 == 0) && (reinterpret_cast<uintptr_t>(src) % 16 == 0);
  if (!aligned || n < 4) return launch(dst, src, n, stream);
  const int64_t n4 = n / 4;
  detail::clear_earlier_error();
  add_inplace_vec4_kernel<<<detail::grid_for(n4), detail::kThreads, 0, detail::as_stream(stream)>>>(
      reinterpret_cast<float4*>(dst), reinterpret_cast<const float4*>(src), n4);
  if (const int status = detail::launch_status(); status != 0) return status;
  return launch(dst + n4 * 4, src + n4 * 4, n - n4 * 4, stream);  // the 0-3 left over
}
int add_inplace(double* dst, const double* src, int64_t n, void* stream) { return launch(dst, src, n, stream); }
int add_inplace(int64_t* dst, const int64_t* src, int64_t n, void* stream) { return launch(dst, src, n, stream); }

}  // namespace dpv::kernels
