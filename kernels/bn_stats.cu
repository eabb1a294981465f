#include "kernels/bn_stats.h"
#include "kernels/common.cuh"

namespace dpv::kernels {
namespace {

template <typename T>
__global__ void bn_stats_kernel(const T* __restrict__ x, T* mean, T* var_b, int64_t N, int64_t C, int64_t S) {
  const detail::ChannelSlot slot = detail::channel_slot(C);
  const double n = static_cast<double>(N) * static_cast<double>(S);
  double acc[1];
  detail::channel_sum<1>(slot.c, N, C, S, [x](int64_t i, double (&a)[1]) { a[0] += static_cast<double>(x[i]); }, acc);
  const double mu = n > 0 ? acc[0] / n : 0.0;
  // Second pass over the same elements (L2-resident for the chunk sizes of a training step).
  detail::channel_sum<1>(slot.c, N, C, S,
                         [x, mu](int64_t i, double (&a)[1]) {
                           const double d = static_cast<double>(x[i]) - mu;
                           a[0] += d * d;
                         },
                         acc);
  if (slot.writer) {
    mean[slot.c] = static_cast<T>(mu);
    var_b[slot.c] = static_cast<T>(n > 0 ? acc[0] / n : 0.0);
  }
}

template <typename T>
int launch(const T* x, T* mean, T* var_b, int64_t N, int64_t C, int64_t S, void* stream) {
  if (C <= 0) return 0;
  const detail::ChannelLaunch l = detail::channel_launch(C, S);
  detail::clear_earlier_error();
  bn_stats_kernel<T><<<l.grid, l.block, 0, detail::as_stream(stream)>>>(x, mean, var_b, N, C, S);
  return detail::launch_status();
}

}  // namespace

int bn_stats(const float* x, float* mean, float* var_b, int64_t N, int64_t C, int64_t S, void* stream) {
  return launch(x, mean, var_b, N, C, S, stream);
}
int bn_stats(const double* x, double* mean, double* var_b, int64_t N, int64_t C, int64_t S, void* stream) {
  return launch(x, mean, var_b, N, C, S, stream);
}

}  // namespace dpv::kernels
