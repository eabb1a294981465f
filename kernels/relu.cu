#include "kernels/common.cuh"
#include "kernels/math/elementwise.h"
#include "kernels/relu.h"

namespace dpv::kernels {
namespace {

template <typename T>
__global__ void relu_forward_kernel(const T* x, T* y, int64_t n) {
  detail::for_each_index(n, [&](int64_t i) { y[i] = math::relu(x[i]); });
}

template <typename T>
__global__ void relu_backward_kernel(const T* y, const T* dy, T* dx, int64_t n) {
  detail::for_each_index(n, [&](int64_t i) { dx[i] = math::relu_backward(y[i], dy[i]); });
}

template <typename T>
int forward(const T* x, T* y, int64_t n, void* stream) {
  if (n <= 0) return 0;
  detail::clear_earlier_error();
  relu_forward_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(x, y, n);
  return detail::launch_status();
}

template <typename T>
int backward(const T* y, const T* dy, T* dx, int64_t n, void* stream) {
  if (n <= 0) return 0;
  detail::clear_earlier_error();
  relu_backward_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(y, dy, dx, n);
  return detail::launch_status();
}

}  // namespace

int relu_forward(const float* x, float* y, int64_t n, void* stream) { return forward(x, y, n, stream); }
int relu_forward(const double* x, double* y, int64_t n, void* stream) { return forward(x, y, n, stream); }
int relu_backward(const float* y, const float* dy, float* dx, int64_t n, void* stream) {
  return backward(y, dy, dx, n, stream);
}
int relu_backward(const double* y, const double* dy, double* dx, int64_t n, void* stream) {
  return backward(y, dy, dx, n, stream);
}

}  // namespace dpv::kernels
