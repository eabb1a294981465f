#include "kernels/common.cuh"
#include "kernels/math/indexing.h"
#include "kernels/permute_nos.h"

namespace dpv::kernels {
namespace {

// One thread per dst element, so writes are coalesced; reads are contiguous along S.
template <typename T>
__global__ void permute_nos_kernel(const T* __restrict__ src, T* __restrict__ dst, int64_t A, int64_t B, int64_t S,
                                   int64_t total) {
  detail::for_each_index(total, [&](int64_t i) { dst[i] = src[math::permute_source(i, A, B, S)]; });
}

template <typename T>
int launch(const T* src, T* dst, int64_t A, int64_t B, int64_t S, void* stream) {
  const int64_t total = A * B * S;
  if (total <= 0) return 0;
  detail::clear_earlier_error();
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
