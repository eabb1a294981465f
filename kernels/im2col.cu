#include "kernels/common.cuh"
#include "kernels/im2col.h"
#include "kernels/math/indexing.h"

namespace dpv::kernels {
namespace {

// One thread per col element [n, (c, ki, kj), (oh, ow)].
template <typename T>
__global__ void im2col_kernel(const T* __restrict__ x, T* __restrict__ col, ConvShape g, int64_t total) {
  detail::for_each_index(total, [&](int64_t i) {
    const int64_t src = math::im2col_source(i, g);
    col[i] = src >= 0 ? x[src] : T(0);
  });
}

// One thread per dx element: gathers the col entries that read it (no atomics, so the sum order
// is fixed: ki, then kj, ascending, the order the CPU backend's scatter adds them in).
template <typename T>
__global__ void col2im_kernel(const T* __restrict__ col, T* __restrict__ dx, ConvShape g, int64_t total) {
  detail::for_each_index(total, [&](int64_t i) {
    T sum = T(0);
    for (int64_t ki = 0; ki < g.kh; ++ki)
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const int64_t src = math::col2im_source(i, ki, kj, g);
        if (src >= 0) sum += col[src];
      }
    dx[i] = sum;
  });
}

template <typename T>
int launch_im2col(const T* x, T* col, const ConvShape& g, void* stream) {
  const int64_t total = g.N * g.C * g.kh * g.kw * g.OH * g.OW;
  if (total <= 0) return 0;
  detail::clear_earlier_error();
  im2col_kernel<T><<<detail::grid_for(total), detail::kThreads, 0, detail::as_stream(stream)>>>(x, col, g, total);
  return detail::launch_status();
}

template <typename T>
int launch_col2im(const T* col, T* dx, const ConvShape& g, void* stream) {
  const int64_t total = g.N * g.C * g.H * g.W;
  if (total <= 0) return 0;
  detail::clear_earlier_error();
  col2im_kernel<T><<<detail::grid_for(total), detail::kThreads, 0, detail::as_stream(stream)>>>(col, dx, g, total);
  return detail::launch_status();
}

}  // namespace

int im2col(const float* x, float* col, const ConvShape& g, void* stream) { return launch_im2col(x, col, g, stream); }
int im2col(const double* x, double* col, const ConvShape& g, void* stream) { return launch_im2col(x, col, g, stream); }
int col2im(const float* col, float* dx, const ConvShape& g, void* stream) { return launch_col2im(col, dx, g, stream); }
int col2im(const double* col, double* dx, const ConvShape& g, void* stream) { return launch_col2im(col, dx, g, stream); }

}  // namespace dpv::kernels
