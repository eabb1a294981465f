#include "kernels/common.cuh"
#include "kernels/fill.h"

namespace dpv::kernels {
namespace {

template <typename T>
__global__ void fill_kernel(T* x, int64_t n, T value) {
  for (int64_t i = detail::global_thread(); i < n; i += detail::grid_threads()) x[i] = value;
}

template <typename T>
int launch(T* x, int64_t n, double value, void* stream) {
  if (n <= 0) return 0;
  detail::clear_earlier_error();
  fill_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(x, n, static_cast<T>(value));
  return detail::launch_status();
}

}  // namespace

int fill(float* x, int64_t n, double value, void* stream) { return launch(x, n, value, stream); }
int fill(double* x, int64_t n, double value, void* stream) { return launch(x, n, value, stream); }
int fill(int64_t* x, int64_t n, double value, void* stream) { return launch(x, n, value, stream); }

}  // namespace dpv::kernels
