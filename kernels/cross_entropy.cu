#include <cmath>

#include "kernels/common.cuh"
#include "kernels/cross_entropy.h"

namespace dpv::kernels {
namespace {

constexpr int kRowThreads = 128;
constexpr int kSumThreads = 1024;

// One block per row: max, sum of exponentials, then the gradient row. Invalid targets give a
// zero row loss here; the summing kernel reports them.
template <typename T>
__global__ void cross_entropy_rows_kernel(const T* __restrict__ logits, const int64_t* target, T* __restrict__ dlogits,
                                          double* row_loss, int64_t N, int64_t K, double scale) {
  __shared__ double shared_max[32];
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const T* x = logits + row * K;
    T* g = dlogits + row * K;
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
    const int64_t t = target[row];
    const bool valid = t >= 0 && t < K;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
      const double p = exp(static_cast<double>(x[k]) - lse);
      g[k] = static_cast<T>((p - (k == t ? 1.0 : 0.0)) * scale);
    }
    if (threadIdx.x == 0) row_loss[row] = valid ? lse - static_cast<double>(x[t]) : 0.0;
  }
}

// One block: the mean of the row losses in a fixed order, and the first invalid target.
template <typename T>
__global__ void cross_entropy_sum_kernel(const double* row_loss, const int64_t* target, T* loss_out, int64_t* info,
                                         int64_t N, int64_t K) {
  __shared__ int64_t first_bad[kSumThreads];
  double acc[1] = {0.0};
  int64_t bad = N;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    acc[0] += row_loss[i];
    const int64_t t = target[i];
    if ((t < 0 || t >= K) && i < bad) bad = i;
  }
  detail::block_sum<1>(acc);
  first_bad[threadIdx.x] = bad;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) first_bad[threadIdx.x] = min(first_bad[threadIdx.x], first_bad[threadIdx.x + stride]);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    loss_out[0] = static_cast<T>(N > 0 ? acc[0] / static_cast<double>(N) : NAN);
    const int64_t row = first_bad[0];
    info[0] = row < N ? row : -1;
    info[1] = row < N ? target[row] : 0;
  }
}

template <typename T>
int launch(const T* logits, const int64_t* target, T* loss_out, T* dlogits, int64_t N, int64_t K, double grad_scale,
           void* workspace, void* stream) {
  cudaStream_t s = detail::as_stream(stream);
  auto* row_loss = static_cast<double*>(workspace);
  int64_t* info = cross_entropy_info(workspace, N);
  if (N > 0 && K > 0) {
    const unsigned blocks = static_cast<unsigned>(N < 65535 * 16 ? N : 65535 * 16);
    cross_entropy_rows_kernel<T><<<blocks, kRowThreads, 0, s>>>(logits, target, dlogits, row_loss, N, K,
                                                                grad_scale / static_cast<double>(N));
    if (const int status = detail::launch_status(); status != 0) return status;
  }
  cross_entropy_sum_kernel<T><<<1, kSumThreads, 0, s>>>(row_loss, target, loss_out, info, N, K);
  return detail::launch_status();
}

}  // namespace

int64_t cross_entropy_workspace_bytes(int64_t N) { return ((N * 8 + 15) / 16) * 16 + 16; }
int64_t* cross_entropy_info(void* workspace, int64_t N) {
  return reinterpret_cast<int64_t*>(static_cast<char*>(workspace) + ((N * 8 + 15) / 16) * 16);
}

int cross_entropy(const float* logits, const int64_t* target, float* loss_out, float* dlogits, int64_t N, int64_t K,
                  double grad_scale, void* workspace, void* stream) {
  return launch(logits, target, loss_out, dlogits, N, K, grad_scale, workspace, stream);
}
int cross_entropy(const double* logits, const int64_t* target, double* loss_out, double* dlogits, int64_t N,
                  int64_t K, double grad_scale, void* workspace, void* stream) {
  return launch(logits, target, loss_out, dlogits, N, K, grad_scale, workspace, stream);
}

}  // namespace dpv::kernels
