#include "kernels/common.cuh"
#include "kernels/permute_nos.h"

namespace dpv::kernels {
namespace {

// One thread per dst element, so writes are coalesced; reads are contiguous along S.
template <typename T>
__global__ void permute_nos_kernel(const T* __restrict__ src, T* __restrict__ dst, int64_t A, int64_t B, int64_t S,
                                   int64_t total) {
  for (int64_t i = detail::global_thread(); i < total; i += detail::grid_threads()) {
    const int64_t s = i % S;
    const int64_t a = (i / S) % A;
    const int64_t b = i / (S * A);
    dst[i] = src[(a * B + b) * S + s];
  }
}

template <typename T>
int launch(const T* src, T* dst, int64_t A, int64_t B, int64_t S, void* stream) {
  const int64_t total = A * B * S;
  if (total <= 0) return 0;
  permute_nos_kernel<T><<<detail::grid_for(total), detail::kThreads, 0, detail::as_stream(stream)>>>(src, dst, A, B, S, total);
  return detail::launch_status();
}

}  // namespace

int permute_nos(const float* src, float* dst, int64_t A, int64_t B, int64_t S, void* stream) {
  return launch(src, dst, A, B, S, stream);
}
int permute_nos(const double* src, double* dst, int64_t A, int64_t B, int64_t S, void* stream) {
  return launch(src, dst, A, B, S, stream);
}

}  // namespace dpv::kernels
