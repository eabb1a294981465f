#include "kernels/bn_backward_reduce.h"
#include "kernels/common.cuh"

namespace dpv::kernels {
namespace {

template <typename T>
__global__ void bn_backward_reduce_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* mean,
                                          T* sum_dy, T* sum_dy_xmu, int64_t N, int64_t C, int64_t S) {
  const detail::ChannelSlot slot = detail::channel_slot(C);
  const double mu = slot.c < C ? static_cast<double>(mean[slot.c]) : 0.0;
  double acc[2];
  detail::channel_sum<2>(slot.c, N, C, S,
                         [dy, x, mu](int64_t i, double (&a)[2]) {
                           const double g = static_cast<double>(dy[i]);
                           a[0] += g;
                           a[1] += g * (static_cast<double>(x[i]) - mu);
                         },
                         acc);
  if (slot.writer) {
    sum_dy[slot.c] = static_cast<T>(acc[0]);
    sum_dy_xmu[slot.c] = static_cast<T>(acc[1]);
  }
}

template <typename T>
int launch(const T* dy, const T* x, const T* mean, T* sum_dy, T* sum_dy_xmu, int64_t N, int64_t C, int64_t S,
           void* stream) {
  if (C <= 0) return 0;
  const detail::ChannelLaunch l = detail::channel_launch(C, S);
  detail::clear_earlier_error();
  bn_backward_reduce_kernel<T><<<l.grid, l.block, 0, detail::as_stream(stream)>>>(dy, x, mean, sum_dy, sum_dy_xmu, N, C, S);
  return detail::launch_status();
}

}  // namespace

int bn_backward_reduce(const float* dy, const float* x, const float* mean, float* sum_dy, float* sum_dy_xmu,
                       int64_t N, int64_t C, int64_t S, void* stream) {
  return launch(dy, x, mean, sum_dy, sum_dy_xmu, N, C, S, stream);
}
int bn_backward_reduce(const double* dy, const double* x, const double* mean, double* sum_dy, double* sum_dy_xmu,
                       int64_t N, int64_t C, int64_t S, void* stream) {
  return launch(dy, x, mean, sum_dy, sum_dy_xmu, N, C, S, stream);
}

}  // namespace dpv::kernels
