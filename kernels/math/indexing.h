#pragma once
// Index helpers of the data-movement kernels (im2col, col2im, permute) and of grid-stride loops,
// shared by the CPU backend and the kernels, so their arithmetic is tested on the CPU.
#include <cstdint>

#include "kernels/math/hd.h"

namespace dpv::kernels::math {

// --- grid-stride loops

// Blocks for a grid-stride loop over n elements: one thread per element, capped at max_blocks
// (a multiple of the GPU's multiprocessor count); beyond the cap each thread takes several
// elements. At least one block, so an empty launch is never configured with zero blocks.
DPV_HD inline int64_t grid_blocks(int64_t n, int64_t threads, int64_t max_blocks) {
  const int64_t blocks = (n + threads - 1) / threads;
  return blocks < 1 ? 1 : (blocks > max_blocks ? max_blocks : blocks);
}

// The elements thread `first` of a grid of `stride` threads handles: first, first + stride, ...
// Kernels call it with (global thread index, threads in the grid); the CPU tests simulate a grid.
template <typename F>
DPV_HD inline void grid_stride(int64_t first, int64_t stride, int64_t n, F&& f) {
  for (int64_t i = first; i < n; i += stride) f(i);
}

// --- convolution lowering: x [N, C, H, W] <-> col [N, C*kh*kw, OH*OW]

struct ConvShape {
  int64_t N, C, H, W, kh, kw, stride, pad, OH, OW;
};

// Row r of col is the tap (c, ki, kj) with r = (c*kh + ki)*kw + kj.
struct ConvTap {
  int64_t c, ki, kj;
};
DPV_HD inline ConvTap conv_tap(int64_t row, const ConvShape& g) {
  return {row / (g.kh * g.kw), (row / g.kw) % g.kh, row % g.kw};
}

// The input coordinate that output position `out` reads through tap `k` (may be padding: < 0 or
// past the edge).
DPV_HD inline int64_t conv_input_coord(int64_t out, int64_t k, int64_t stride, int64_t pad) {
  return out * stride - pad + k;
}

// The output position whose tap `k` reads input coordinate `in`, or -1 when none does (the
// inverse of conv_input_coord, for col2im's gather).
DPV_HD inline int64_t conv_output_coord(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t out_size) {
  const int64_t scaled = in + pad - k;  // = out * stride when this input is read by tap k
  if (scaled < 0 || scaled % stride != 0) return -1;
  const int64_t out = scaled / stride;
  return out < out_size ? out : -1;
}

// Element i of col (flat [N, C*kh*kw, OH*OW]) copies x at the returned flat index, or is a zero
// of the padding (-1).
DPV_HD inline int64_t im2col_source(int64_t i, const ConvShape& g) {
  const int64_t P = g.OH * g.OW, rows = g.C * g.kh * g.kw;
  const int64_t p = i % P, row = (i / P) % rows, n = i / (P * rows);
  const ConvTap t = conv_tap(row, g);
  const int64_t ih = conv_input_coord(p / g.OW, t.ki, g.stride, g.pad);
  const int64_t iw = conv_input_coord(p % g.OW, t.kj, g.stride, g.pad);
  if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) return -1;
  return ((n * g.C + t.c) * g.H + ih) * g.W + iw;
}

// col2im gathers: element i of dx (flat [N, C, H, W]) is the sum, over taps ki then kj ascending,
// of the col element this returns (-1: that tap never reads pixel i).
DPV_HD inline int64_t col2im_source(int64_t i, int64_t ki, int64_t kj, const ConvShape& g) {
  const int64_t iw = i % g.W, ih = (i / g.W) % g.H, c = (i / (g.W * g.H)) % g.C, n = i / (g.W * g.H * g.C);
  const int64_t oh = conv_output_coord(ih, ki, g.stride, g.pad, g.OH);
  const int64_t ow = conv_output_coord(iw, kj, g.stride, g.pad, g.OW);
  if (oh < 0 || ow < 0) return -1;
  const int64_t row = (c * g.kh + ki) * g.kw + kj;
  return (n * g.C * g.kh * g.kw + row) * (g.OH * g.OW) + oh * g.OW + ow;
}

// --- permute [A, B, S] -> [B, A, S]: element i of dst copies src at the returned index.
DPV_HD inline int64_t permute_source(int64_t i, int64_t A, int64_t B, int64_t S) {
  const int64_t s = i % S, a = (i / S) % A, b = i / (S * A);
  return (a * B + b) * S + s;
}

}  // namespace dpv::kernels::math
