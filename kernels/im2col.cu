#include "kernels/common.cuh"
#include "kernels/im2col.h"

namespace dpv::kernels {
namespace {

// One thread per col element [n, (c, ki, kj), (oh, ow)].
template <typename T>
__global__ void im2col_kernel(const T* __restrict__ x, T* __restrict__ col, ConvShape g, int64_t total) {
  const int64_t P = g.OH * g.OW;
  const int64_t K = g.C * g.kh * g.kw;
  for (int64_t i = detail::global_thread(); i < total; i += detail::grid_threads()) {
    const int64_t p = i % P;
    const int64_t row = (i / P) % K;
    const int64_t n = i / (P * K);
    const int64_t kj = row % g.kw;
    const int64_t ki = (row / g.kw) % g.kh;
    const int64_t c = row / (g.kw * g.kh);
    const int64_t oh = p / g.OW, ow = p % g.OW;
    const int64_t ih = oh * g.stride - g.pad + ki;
    const int64_t iw = ow * g.stride - g.pad + kj;
    const bool inside = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W;
    col[i] = inside ? x[((n * g.C + c) * g.H + ih) * g.W + iw] : T(0);
  }
}

// One thread per dx element: gathers the col entries that read it (no atomics, so the sum order
// is fixed: ki, then kj, ascending).
template <typename T>
__global__ void col2im_kernel(const T* __restrict__ col, T* __restrict__ dx, ConvShape g, int64_t total) {
  const int64_t P = g.OH * g.OW;
  const int64_t K = g.C * g.kh * g.kw;
  for (int64_t i = detail::global_thread(); i < total; i += detail::grid_threads()) {
    const int64_t iw = i % g.W;
    const int64_t ih = (i / g.W) % g.H;
    const int64_t c = (i / (g.W * g.H)) % g.C;
    const int64_t n = i / (g.W * g.H * g.C);
    T sum = T(0);
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      const int64_t oh_s = ih + g.pad - ki;  // = oh * stride when this pixel is read by tap ki
      if (oh_s < 0 || oh_s % g.stride != 0) continue;
      const int64_t oh = oh_s / g.stride;
      if (oh >= g.OH) continue;
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const int64_t ow_s = iw + g.pad - kj;
        if (ow_s < 0 || ow_s % g.stride != 0) continue;
        const int64_t ow = ow_s / g.stride;
        if (ow >= g.OW) continue;
        const int64_t row = (c * g.kh + ki) * g.kw + kj;
        sum += col[(n * K + row) * P + oh * g.OW + ow];
      }
    }
    dx[i] = sum;
  }
}

template <typename T>
int launch_im2col(const T* x, T* col, const ConvShape& g, void* stream) {
  const int64_t total = g.N * g.C * g.kh * g.kw * g.OH * g.OW;
  if (total <= 0) return 0;
  im2col_kernel<T><<<detail::grid_for(total), detail::kThreads, 0, detail::as_stream(stream)>>>(x, col, g, total);
  return detail::launch_status();
}

template <typename T>
int launch_col2im(const T* col, T* dx, const ConvShape& g, void* stream) {
  const int64_t total = g.N * g.C * g.H * g.W;
  if (total <= 0) return 0;
  col2im_kernel<T><<<detail::grid_for(total), detail::kThreads, 0, detail::as_stream(stream)>>>(col, dx, g, total);
  return detail::launch_status();
}

}  // namespace

int im2col(const float* x, float* col, const ConvShape& g, void* stream) { return launch_im2col(x, col, g, stream); }
int im2col(const double* x, double* col, const ConvShape& g, void* stream) { return launch_im2col(x, col, g, stream); }
int col2im(const float* col, float* dx, const ConvShape& g, void* stream) { return launch_col2im(col, dx, g, stream); }
int col2im(const double* col, double* dx, const ConvShape& g, void* stream) { return launch_col2im(col, dx, g, stream); }

}  // namespace dpv::kernels
