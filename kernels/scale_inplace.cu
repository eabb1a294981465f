#include "kernels/common.cuh"
#include "kernels/math/elementwise.h"
#include "kernels/scale_inplace.h"

namespace dpv::kernels {
namespace {

template <typename T>
__global__ void scale_inplace_kernel(T* x, int64_t n, T alpha) {
  detail::for_each_index(n, [&](int64_t i) { x[i] = math::scale(x[i], alpha); });
}

template <typename T>
int launch(T* x, int64_t n, double alpha, void* stream) {
  if (n <= 0) return 0;
  detail::clear_earlier_error();
  scale_inplace_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(x, n, static_cast<T>(alpha));
  return detail::launch_status();
}

}  // namespace

int scale_inplace(float* x, int64_t n, double alpha, void* stream) { return launch(x, n, alpha, stream); }
int scale_inplace(double* x, int64_t n, double alpha, void* stream) { return launch(x, n, alpha, stream); }

}  // namespace dpv::kernels
