#pragma once
// Conv2d's three passes in float32 through oneDNN, the library PyTorch's CPU convolutions use.
// Private to the CPU backend (no oneDNN type leaks out of engine/cpu). oneDNN has no float64
// convolution, so float64 keeps the im2col + GEMM path (Backend's default conv2d_*).
//
// Primitives are built once per shape and pass, then reused: building one costs far more than a
// small convolution. Buffers in oneDNN's preferred (blocked) layouts are kept with them, so a
// steady-state step allocates nothing here. Every call runs on the calling thread alone (one
// OpenMP thread), as each simulated device is one worker thread. The layouts are chosen pass by
// pass (onednn_conv.cpp, with the timings they were chosen on).
#include <cstdint>
#include <memory>

#include "kernels/math/indexing.h"

namespace dpv::cpu {

class OnednnConv {
 public:
  using Geometry = kernels::math::ConvShape;  // {N, C, H, W, kh, kw, stride, pad, OH, OW}

  OnednnConv();
  ~OnednnConv();
  OnednnConv(const OnednnConv&) = delete;
  OnednnConv& operator=(const OnednnConv&) = delete;

  // y[N, O, OH, OW] = conv(x[N, C, H, W], w[O, C, kh, kw]) + bias[O] (bias may be null: none).
  // The bias is added by the convolution primitive itself, not by another pass over y.
  void forward(const float* x, const float* w, const float* bias, float* y, int64_t O, const Geometry& g);
  // dw[O, C, kh, kw] (+)= the weight gradient from x and dy[N, O, OH, OW] (`accumulate` adds it to
  // what dw holds instead of overwriting it); then, unless dx is null, dx[N, C, H, W] = the input
  // gradient from dy and w (overwritten). One call for both passes, so that dy is staged in
  // oneDNN's layout once for the two when they want the same one.
  void backward(const float* x, const float* dy, const float* w, float* dw, bool accumulate, float* dx, int64_t O,
                const Geometry& g);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dpv::cpu
