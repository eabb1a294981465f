// Backend's default Conv2d: im2col + one GEMM per pass, built from the backend's own ops. It is
// what the CUDA backend runs, what the CPU backend runs in float64 (oneDNN has no float64
// convolution), and the reference the CPU backend's oneDNN path is tested against.
#include "engine/backend.h"
#include "engine/tensor.h"

namespace dpv {

namespace {

// The columns of x laid out [C*k*k, N*L], so one GEMM covers the whole batch (wide enough for BLAS).
Tensor batch_columns(Backend& backend, const Tensor& x, const Backend::ConvGeometry& g) {
  const int64_t rows = g.C * g.kh * g.kw, L = g.OH * g.OW;
  Tensor col = Tensor::empty({g.N, rows, L}, x.dtype(), x.device_ptr());  // [N, C*k*k, L]
  backend.im2col(x, col, g);
  Tensor col_t = Tensor::empty({rows, g.N, L}, x.dtype(), x.device_ptr());  // [C*k*k, N, L]
  backend.permute_nos(col, col_t, g.N, rows, L);
  return col_t;
}

}  // namespace

void Backend::conv2d_forward(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, Tensor& saved,
                             const ConvGeometry& g) {
  const int64_t O = w.dim(0), rows = g.C * g.kh * g.kw, L = g.OH * g.OW;
  const auto& device = x.device_ptr();
  Tensor col_t = batch_columns(*this, x, g);  // [C*k*k, N, L]
  Tensor y_t = Tensor::empty({O, g.N, L}, x.dtype(), device);  // [O, N, L]
  gemm(false, false, O, g.N * L, rows, 1.0, w, col_t, 0.0, y_t);
  permute_nos(y_t, y, O, g.N, L);
  if (bias) add_channel_bias(y, *bias, g.N, O, L);
  saved = col_t;
}

void Backend::conv2d_backward(const Tensor& x, const Tensor& saved, const Tensor& w, const Tensor& dy, Tensor& dw,
                              bool accumulate_dw, Tensor* dx, const ConvGeometry& g) {
  const int64_t O = w.dim(0), rows = g.C * g.kh * g.kw, L = g.OH * g.OW;
  const auto& device = x.device_ptr();
  // [C*k*k, N, L]: saved by this path's forward; rebuilt when another forward ran (an override's).
  const Tensor col_t = saved.defined() ? saved : batch_columns(*this, x, g);
  Tensor dy_t = Tensor::empty({O, g.N, L}, dy.dtype(), device);  // [O, N, L]
  permute_nos(dy, dy_t, g.N, O, L);
  // dW[O, C*k*k] (+)= dy_t[O, N*L] @ col_t[C*k*k, N*L]^T
  gemm(false, true, O, rows, g.N * L, 1.0, dy_t, col_t, accumulate_dw ? 1.0 : 0.0, dw);
  if (!dx) return;
  // dcol_t[C*k*k, N*L] = W^T @ dy_t, then back to [N, C*k*k, L] and scattered into the image.
  Tensor dcol_t = Tensor::empty({rows, g.N, L}, dy.dtype(), device);
  gemm(true, false, rows, g.N * L, O, 1.0, w, dy_t, 0.0, dcol_t);
  Tensor dcol = Tensor::empty({g.N, rows, L}, dy.dtype(), device);
  permute_nos(dcol_t, dcol, rows, g.N, L);
  col2im(dcol, *dx, g);
}

}  // namespace dpv
