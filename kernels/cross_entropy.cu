#include <cmath>

#include "kernels/common.cuh"
#include "kernels/cross_entropy.h"
#include "kernels/math/cross_entropy.h"

namespace dpv::kernels {
namespace {

constexpr int kRowThreads = 128;
constexpr int kSumThreads = 1024;

// One block: counts the rows that count (target not -100) and finds the first out-of-range
// target; the rows kernel needs the count for its gradient scale.
__global__ void cross_entropy_check_kernel(const int64_t* target, math::CeInfo* info, int64_t N, int64_t K) {
  __shared__ int64_t first_bad[kSumThreads];
  double counted[1] = {0.0};
  int64_t bad = N;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    const math::TargetKind kind = math::classify_target(target[i], K);
    if (kind == math::TargetKind::Counted) counted[0] += 1.0;
    if (kind == math::TargetKind::OutOfRange && i < bad) bad = i;
  }
  detail::block_sum<1>(counted);
  first_bad[threadIdx.x] = bad;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) first_bad[threadIdx.x] = min(first_bad[threadIdx.x], first_bad[threadIdx.x + stride]);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const int64_t row = first_bad[0];
    info->bad_row = row < N ? row : -1;
    info->bad_target = row < N ? target[row] : 0;
    info->counted = static_cast<int64_t>(counted[0]);
    info->unused = 0;
  }
}

// One block per row: max, sum of exponentials, then the gradient row. Ignored and invalid targets
// give a zero row (loss and gradient); the check kernel reports the invalid ones.
template <typename T>
__global__ void cross_entropy_rows_kernel(const T* __restrict__ logits, const int64_t* target, T* __restrict__ dlogits,
                                          double* row_loss, const math::CeInfo* info, int64_t N, int64_t K,
                                          double grad_scale) {
  __shared__ double shared_max[32];
  const double scale = grad_scale / static_cast<double>(info->counted);
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const T* x = logits + row * K;
    T* g = dlogits + row * K;
    const int64_t t = target[row];
    if (math::classify_target(t, K) != math::TargetKind::Counted) {  // uniform across the block
      for (int64_t k = threadIdx.x; k < K; k += blockDim.x) g[k] = T(0);
      if (threadIdx.x == 0) row_loss[row] = 0.0;
      continue;
    }
    // Row maximum.
    double m = -INFINITY;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) m = fmax(m, static_cast<double>(x[k]));
    for (int offset = 16; offset > 0; offset >>= 1) m = fmax(m, __shfl_down_sync(0xffffffffu, m, offset));
    if ((threadIdx.x & 31) == 0) shared_max[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
      double all = -INFINITY;
      for (int w = 0; w < (blockDim.x + 31) / 32; ++w) all = fmax(all, shared_max[w]);
      shared_max[0] = all;
    }
    __syncthreads();
    m = shared_max[0];
    __syncthreads();
    // Sum of exponentials.
    double e[1] = {0.0};
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) e[0] += exp(static_cast<double>(x[k]) - m);
    detail::block_sum<1>(e);
    const double lse = m + log(e[0]);
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
      g[k] = static_cast<T>(math::ce_grad(static_cast<double>(x[k]), lse, k == t, scale));
    if (threadIdx.x == 0) row_loss[row] = math::ce_row_loss(lse, static_cast<double>(x[t]));
  }
}

// One block: the mean of the row losses over the counted rows, in a fixed order.
template <typename T>
__global__ void cross_entropy_mean_kernel(const double* row_loss, const math::CeInfo* info, T* loss_out, int64_t N) {
  double acc[1] = {0.0};
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) acc[0] += row_loss[i];
  detail::block_sum<1>(acc);
  if (threadIdx.x == 0) loss_out[0] = static_cast<T>(math::ce_mean(acc[0], info->counted));
}

template <typename T>
int launch(const T* logits, const int64_t* target, T* loss_out, T* dlogits, int64_t N, int64_t K, double grad_scale,
           void* workspace, void* stream) {
  cudaStream_t s = detail::as_stream(stream);
  auto* row_loss = static_cast<double*>(workspace);
  auto* info = reinterpret_cast<math::CeInfo*>(static_cast<char*>(workspace) + math::ce_info_offset(N));
  detail::clear_earlier_error();
  cross_entropy_check_kernel<<<1, kSumThreads, 0, s>>>(target, info, N, K);
  if (const int status = detail::launch_status(); status != 0) return status;
  if (N > 0 && K > 0) {
    const unsigned blocks = static_cast<unsigned>(N < 65535 * 16 ? N : 65535 * 16);
    detail::clear_earlier_error();
    cross_entropy_rows_kernel<T><<<blocks, kRowThreads, 0, s>>>(logits, target, dlogits, row_loss, info, N, K,
                                                                grad_scale);
    if (const int status = detail::launch_status(); status != 0) return status;
  }
  // Without classes the rows kernel did not run, so row_loss holds nothing: no row can count
  // (every target is ignored or out of range), and the mean sums no rows (0/0 = nan, not garbage).
  const int64_t written_rows = K > 0 ? N : 0;
  detail::clear_earlier_error();
  cross_entropy_mean_kernel<T><<<1, kSumThreads, 0, s>>>(row_loss, info, loss_out, written_rows);
  return detail::launch_status();
}

}  // namespace

int cross_entropy(const float* logits, const int64_t* target, float* loss_out, float* dlogits, int64_t N, int64_t K,
                  double grad_scale, void* workspace, void* stream) {
  return launch(logits, target, loss_out, dlogits, N, K, grad_scale, workspace, stream);
}
int cross_entropy(const double* logits, const int64_t* target, double* loss_out, double* dlogits, int64_t N,
                  int64_t K, double grad_scale, void* workspace, void* stream) {
  return launch(logits, target, loss_out, dlogits, N, K, grad_scale, workspace, stream);
}

}  // namespace dpv::kernels
