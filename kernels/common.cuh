#pragma once
// Helpers shared by the .cu files: grid sizing, grid-stride loops and deterministic block sums.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/math/indexing.h"

namespace dpv::kernels::detail {

constexpr int kThreads = 256;            // threads per block for element-wise kernels
constexpr int kColumnTile = 32;          // channels per block in the column layout (S == 1)
constexpr int kColumnRows = 8;           // rows per block in the column layout

inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

// The most blocks a grid-stride launch uses on the current GPU: kBlocksPerSm per multiprocessor,
// read from the device once per GPU (device_limits.cu).
constexpr int64_t kBlocksPerSm = 64;
int64_t max_grid_blocks();

// Blocks for a grid-stride loop over n elements (math::grid_blocks): one thread per element up to
// the cap that keeps every multiprocessor busy; beyond it each thread takes several elements.
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  return static_cast<unsigned>(math::grid_blocks(n, threads, max_grid_blocks()));
}

// A launch reports its own status, not an earlier call's: before each launch the error an earlier
// call left behind is cleared (its own check reported it already), and after it the status is
// peeked, then cleared, so the next launch does not report it again. A sticky error (a kernel that
// faulted) cannot be cleared: every later call reports it, as the state of the device.
inline void clear_earlier_error() { (void)cudaGetLastError(); }
// The launch status as the int the launchers return (0: accepted).
inline int launch_status() {
  const cudaError_t status = cudaPeekAtLastError();
  if (status != cudaSuccess) (void)cudaGetLastError();
  return static_cast<int>(status);
}

__device__ inline int64_t global_thread() { return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; }
__device__ inline int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// for i in this thread's share of [0, n): the grid-stride loop of every element-wise kernel.
template <typename F>
__device__ inline void for_each_index(int64_t n, F&& f) {
  math::grid_stride(global_thread(), grid_threads(), n, f);
}

// Sums K values over a 1-D block (blockDim.x a multiple of 32, at most 1024); every thread gets
// the totals. The order of additions is fixed, so results are deterministic.
template <int K>
__device__ void block_sum(double (&v)[K]) {
  __shared__ double partial[K][32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int k = 0; k < K; ++k)
    for (int offset = 16; offset > 0; offset >>= 1) v[k] += __shfl_down_sync(0xffffffffu, v[k], offset);
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) partial[k][warp] = v[k];
  }
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      v[k] = lane < warps ? partial[k][lane] : 0.0;
      for (int offset = 16; offset > 0; offset >>= 1) v[k] += __shfl_down_sync(0xffffffffu, v[k], offset);
    }
    if (lane == 0) {
#pragma unroll
      for (int k = 0; k < K; ++k) partial[k][0] = v[k];
    }
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < K; ++k) v[k] = partial[k][0];
  __syncthreads();  // the shared array may be reused by the caller's next sum
}

// Per-channel sums over x [N, C, S] (N = batch, S = spatial), in one of two block layouts chosen
// at launch (see ChannelLaunch):
//  - columns (S == 1, blockDim = 32 x 8): 32 neighbouring channels per block, so each warp reads
//    128 contiguous bytes of a row; the 8 row groups are summed in shared memory.
//  - one channel per block (S > 1, blockDim = 256 x 1): the block strides over the N*S elements.
// `add(index, acc)` adds the contributions of element `index` of [N, C, S] to acc.
// Returns the channel of this thread (may be >= C in the column layout: then acc is unused).
struct ChannelSlot {
  int64_t c;
  bool writer;  // the one thread per channel that stores the result
};

__device__ inline bool column_layout() { return blockDim.y > 1; }

__device__ inline ChannelSlot channel_slot(int64_t C) {
  if (column_layout()) {
    const int64_t c = blockIdx.x * static_cast<int64_t>(kColumnTile) + threadIdx.x;
    return {c, threadIdx.y == 0 && c < C};
  }
  return {static_cast<int64_t>(blockIdx.x), threadIdx.x == 0};
}

template <int K, class Add>
__device__ void channel_sum(int64_t c, int64_t N, int64_t C, int64_t S, Add add, double (&acc)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) acc[k] = 0.0;
  if (column_layout()) {
    __shared__ double partial[K][kColumnRows][kColumnTile];
    if (c < C)
      for (int64_t r = threadIdx.y; r < N; r += blockDim.y) add(r * C + c, acc);
#pragma unroll
    for (int k = 0; k < K; ++k) partial[k][threadIdx.y][threadIdx.x] = acc[k];
    __syncthreads();
    if (threadIdx.y == 0) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        double total = 0.0;
        for (int y = 0; y < kColumnRows; ++y) total += partial[k][y][threadIdx.x];
        partial[k][0][threadIdx.x] = total;
      }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < K; ++k) acc[k] = partial[k][0][threadIdx.x];
    __syncthreads();
    return;
  }
  const int64_t n = N * S;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t r = i / S;
    const int64_t s = i - r * S;
    add((r * C + c) * S + s, acc);
  }
  block_sum<K>(acc);
}

// Grid and block for a channel_sum kernel over [N, C, S].
struct ChannelLaunch {
  dim3 grid, block;
};
inline ChannelLaunch channel_launch(int64_t C, int64_t S) {
  if (S == 1)
    return {dim3(static_cast<unsigned>((C + kColumnTile - 1) / kColumnTile)), dim3(kColumnTile, kColumnRows)};
  return {dim3(static_cast<unsigned>(C)), dim3(kThreads)};
}

}  // namespace dpv::kernels::detail
