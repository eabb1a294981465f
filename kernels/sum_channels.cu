#include "kernels/common.cuh"
#include "kernels/sum_channels.h"

namespace dpv::kernels {
namespace {

template <typename T>
__global__ void sum_channels_kernel(const T* dy, T* out, int64_t N, int64_t C, int64_t S, bool accumulate) {
  const detail::ChannelSlot slot = detail::channel_slot(C);
  double acc[1];
  detail::channel_sum<1>(slot.c, N, C, S, [dy](int64_t i, double (&a)[1]) { a[0] += static_cast<double>(dy[i]); }, acc);
  // The sum is rounded to T first, then added in T: accumulating is grad += this sum (two T tensors),
  // as PyTorch's AccumulateGrad and the CPU backend add them.
  if (slot.writer) out[slot.c] = accumulate ? static_cast<T>(out[slot.c] + static_cast<T>(acc[0])) : static_cast<T>(acc[0]);
}

template <typename T>
int launch(const T* dy, T* out, int64_t N, int64_t C, int64_t S, bool accumulate, void* stream) {
  if (C <= 0) return 0;
  const detail::ChannelLaunch l = detail::channel_launch(C, S);
  detail::clear_earlier_error();
  sum_channels_kernel<T><<<l.grid, l.block, 0, detail::as_stream(stream)>>>(dy, out, N, C, S, accumulate);
  return detail::launch_status();
}

}  // namespace

int sum_channels(const float* dy, float* out, int64_t N, int64_t C, int64_t S, bool accumulate, void* stream) {
  return launch(dy, out, N, C, S, accumulate, stream);
}
int sum_channels(const double* dy, double* out, int64_t N, int64_t C, int64_t S, bool accumulate, void* stream) {
  return launch(dy, out, N, C, S, accumulate, stream);
}

}  // namespace dpv::kernels
