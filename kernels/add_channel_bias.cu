#include "kernels/add_channel_bias.h"
#include "kernels/common.cuh"

namespace dpv::kernels {
namespace {

template <typename T>
__global__ void add_channel_bias_kernel(T* y, const T* bias, int64_t n, int64_t C, int64_t S) {
  for (int64_t i = detail::global_thread(); i < n; i += detail::grid_threads()) y[i] += bias[(i / S) % C];
}

template <typename T>
int launch(T* y, const T* bias, int64_t N, int64_t C, int64_t S, void* stream) {
  const int64_t n = N * C * S;
  if (n <= 0) return 0;
  detail::clear_earlier_error();
  add_channel_bias_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(y, bias, n, C, S);
  return detail::launch_status();
}

}  // namespace

int add_channel_bias(float* y, const float* bias, int64_t N, int64_t C, int64_t S, void* stream) {
  return launch(y, bias, N, C, S, stream);
}
int add_channel_bias(double* y, const double* bias, int64_t N, int64_t C, int64_t S, void* stream) {
  return launch(y, bias, N, C, S, stream);
}

}  // namespace dpv::kernels
