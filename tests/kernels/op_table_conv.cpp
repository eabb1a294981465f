// The op table's convolution entries: im2col, col2im and the [A, B, S] -> [B, A, S] permute the
// default Conv2d is built from, and Conv2d forward and backward themselves (the CPU backend runs
// oneDNN in float32, im2col + GEMM in float64; the CUDA backend im2col + cuBLAS), against direct
// convolution loops.
#include <algorithm>
#include <string>

#include "tests/kernels/op_table.h"

namespace dpv::test {
namespace {

// Non-square images, padding, both strides, a 1x1 kernel; C not a multiple of anything.
const std::vector<OpCase> kGeometries{
    {"k3_stride1_pad1", {{"N", 3}, {"C", 4}, {"H", 9}, {"W", 7}, {"kh", 3}, {"kw", 3}, {"stride", 1}, {"pad", 1}}},
    {"k3_stride2_pad1", {{"N", 3}, {"C", 4}, {"H", 9}, {"W", 7}, {"kh", 3}, {"kw", 3}, {"stride", 2}, {"pad", 1}}},
    {"k1_stride1_pad0", {{"N", 2}, {"C", 5}, {"H", 6}, {"W", 6}, {"kh", 1}, {"kw", 1}, {"stride", 1}, {"pad", 0}}}};

Shape image_shape(const Backend::ConvGeometry& g) { return {g.N, g.C, g.H, g.W}; }
Shape col_shape(const Backend::ConvGeometry& g) { return {g.N, g.C * g.kh * g.kw, g.OH * g.OW}; }

// The input pixel (flat index into x [N, C, H, W]) that output position (oh, ow) reads through
// tap (ki, kj) of channel c, or -1 where the tap falls on the padding.
int64_t tapped_pixel(const Backend::ConvGeometry& g, int64_t n, int64_t c, int64_t ki, int64_t kj, int64_t oh,
                     int64_t ow) {
  const int64_t ih = oh * g.stride - g.pad + ki, iw = ow * g.stride - g.pad + kj;
  if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) return -1;
  return ((n * g.C + c) * g.H + ih) * g.W + iw;
}

// Calls f(n, c, ki, kj, oh, ow, pixel) for every tap of every output position that reads a pixel.
template <typename F>
void for_each_tap(const Backend::ConvGeometry& g, F&& f) {
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t ki = 0; ki < g.kh; ++ki)
        for (int64_t kj = 0; kj < g.kw; ++kj)
          for (int64_t oh = 0; oh < g.OH; ++oh)
            for (int64_t ow = 0; ow < g.OW; ++ow) {
              const int64_t pixel = tapped_pixel(g, n, c, ki, kj, oh, ow);
              if (pixel >= 0) f(n, c, ki, kj, oh, ow, static_cast<size_t>(pixel));
            }
}

// Flat index of col [N, C*kh*kw, OH*OW] at (n, tap row of (c, ki, kj), position (oh, ow)).
size_t col_index(const Backend::ConvGeometry& g, int64_t n, int64_t c, int64_t ki, int64_t kj, int64_t oh, int64_t ow) {
  const int64_t row = (c * g.kh + ki) * g.kw + kj;
  return static_cast<size_t>((n * g.C * g.kh * g.kw + row) * g.OH * g.OW + oh * g.OW + ow);
}

OpEntry im2col_entry() {
  return {
      .name = "im2col",
      .outputs = {"col"},
      .tolerance = kExact,
      .cases = kGeometries,
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        const auto g = conv_geometry(c);
        OpTensors t;
        t.add("x", uniform_tensor(image_shape(g), dt, rng));
        t.add("col", nan_tensor(col_shape(g), dt));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) { be.im2col(t.at("x"), t.at("col"), conv_geometry(c)); },
      .reference = [](const OpCase& c, const OpTensors& in) {
        const auto g = conv_geometry(c);
        const std::vector<double> x = in.values("x");
        std::vector<double> col(static_cast<size_t>(shape_numel(col_shape(g))), 0.0);  // padding reads 0
        for_each_tap(g, [&](int64_t n, int64_t ch, int64_t ki, int64_t kj, int64_t oh, int64_t ow, size_t pixel) {
          col[col_index(g, n, ch, ki, kj, oh, ow)] = x[pixel];
        });
        return OpValues{{"col", col}};
      },
  };
}

OpEntry col2im_entry() {
  return {
      .name = "col2im",
      .outputs = {"dx"},
      .tolerance = kReduction,
      .cases = kGeometries,
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        const auto g = conv_geometry(c);
        OpTensors t;
        t.add("col", uniform_tensor(col_shape(g), dt, rng));
        t.add("dx", nan_tensor(image_shape(g), dt));  // col2im zeroes it first
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) { be.col2im(t.at("col"), t.at("dx"), conv_geometry(c)); },
      .reference = [](const OpCase& c, const OpTensors& in) {
        const auto g = conv_geometry(c);
        const std::vector<double> col = in.values("col");
        std::vector<double> dx(static_cast<size_t>(shape_numel(image_shape(g))), 0.0);
        for_each_tap(g, [&](int64_t n, int64_t ch, int64_t ki, int64_t kj, int64_t oh, int64_t ow, size_t pixel) {
          dx[pixel] += col[col_index(g, n, ch, ki, kj, oh, ow)];
        });
        return OpValues{{"dx", dx}};
      },
  };
}

OpEntry permute_nos_entry() {
  return {
      .name = "permute_nos",
      .outputs = {"dst"},
      .tolerance = kExact,
      .cases = {{"A5_B6_S11", {{"A", 5}, {"B", 6}, {"S", 11}}}, {"A7_B3_S1", {{"A", 7}, {"B", 3}, {"S", 1}}}},
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        const int64_t A = c.size("A"), B = c.size("B"), S = c.size("S");
        OpTensors t;
        t.add("src", uniform_tensor({A, B, S}, dt, rng));
        t.add("dst", nan_tensor({B, A, S}, dt));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) {
        be.permute_nos(t.at("src"), t.at("dst"), c.size("A"), c.size("B"), c.size("S"));
      },
      .reference = [](const OpCase& c, const OpTensors& in) {
        const int64_t A = c.size("A"), B = c.size("B"), S = c.size("S");
        const std::vector<double> src = in.values("src");  // [A, B, S]
        std::vector<double> dst(src.size());                // [B, A, S]
        for (int64_t a = 0; a < A; ++a)
          for (int64_t b = 0; b < B; ++b)
            for (int64_t s = 0; s < S; ++s) dst[at_ncs(b, a, s, A, S)] = src[at_ncs(a, b, s, B, S)];
        return OpValues{{"dst", dst}};
      },
  };
}

constexpr int64_t kOutChannels = 6;  // O

Shape weight_shape(const Backend::ConvGeometry& g) { return {kOutChannels, g.C, g.kh, g.kw}; }
Shape output_shape(const Backend::ConvGeometry& g) { return {g.N, kOutChannels, g.OH, g.OW}; }

// Flat indices of w [O, C, kh, kw] and y [N, O, OH, OW].
size_t weight_index(const Backend::ConvGeometry& g, int64_t o, int64_t c, int64_t ki, int64_t kj) {
  return static_cast<size_t>(((o * g.C + c) * g.kh + ki) * g.kw + kj);
}
size_t output_index(const Backend::ConvGeometry& g, int64_t n, int64_t o, int64_t oh, int64_t ow) {
  return static_cast<size_t>(((n * kOutChannels + o) * g.OH + oh) * g.OW + ow);
}

OpEntry conv2d_forward_entry() {
  return {
      .name = "conv2d_forward",
      .outputs = {"y"},
      .tolerance = kReduction,
      .cases = kGeometries,
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        const auto g = conv_geometry(c);
        OpTensors t;
        t.add("x", uniform_tensor(image_shape(g), dt, rng));
        t.add("w", uniform_tensor(weight_shape(g), dt, rng));
        t.add("y", nan_tensor(output_shape(g), dt));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) {
        Tensor saved;
        be.conv2d_forward(t.at("x"), t.at("w"), nullptr, t.at("y"), saved, conv_geometry(c));
      },
      .reference = [](const OpCase& c, const OpTensors& in) {
        const auto g = conv_geometry(c);
        const std::vector<double> x = in.values("x"), w = in.values("w");
        std::vector<double> y(static_cast<size_t>(shape_numel(output_shape(g))), 0.0);
        for_each_tap(g, [&](int64_t n, int64_t ch, int64_t ki, int64_t kj, int64_t oh, int64_t ow, size_t pixel) {
          for (int64_t o = 0; o < kOutChannels; ++o)
            y[output_index(g, n, o, oh, ow)] += w[weight_index(g, o, ch, ki, kj)] * x[pixel];
        });
        return OpValues{{"y", y}};
      },
  };
}

OpCase backward_case(const OpCase& geometry, bool accumulate_dw, bool with_dx) {
  OpCase c = geometry;
  c.label += std::string(accumulate_dw ? "_accumulate_dw" : "") + (with_dx ? "_dx" : "_no_dx");
  c.values["accumulate_dw"] = accumulate_dw ? 1 : 0;
  c.values["with_dx"] = with_dx ? 1 : 0;
  return c;
}

OpEntry conv2d_backward_entry() {
  return {
      .name = "conv2d_backward",
      .outputs = {"dw", "dx"},
      .tolerance = kReduction,
      .cases = {backward_case(kGeometries[0], false, true), backward_case(kGeometries[1], true, true),
                backward_case(kGeometries[2], false, false), backward_case(kGeometries[0], true, false)},
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        const auto g = conv_geometry(c);
        OpTensors t;
        t.add("x", uniform_tensor(image_shape(g), dt, rng));
        t.add("w", uniform_tensor(weight_shape(g), dt, rng));
        t.add("dy", uniform_tensor(output_shape(g), dt, rng));
        t.add("dw", c.flag("accumulate_dw") ? uniform_tensor(weight_shape(g), dt, rng) : nan_tensor(weight_shape(g), dt));
        t.add("dx", nan_tensor(image_shape(g), dt));  // overwritten, or untouched without dx
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) {
        // Backward takes what this backend's forward saved (columns, or nothing for oneDNN).
        const auto g = conv_geometry(c);
        Tensor y = Tensor::empty(output_shape(g), t.at("x").dtype(), t.at("x").device_ptr());
        Tensor saved;
        be.conv2d_forward(t.at("x"), t.at("w"), nullptr, y, saved, g);
        be.conv2d_backward(t.at("x"), saved, t.at("w"), t.at("dy"), t.at("dw"), c.flag("accumulate_dw"),
                           c.flag("with_dx") ? &t.at("dx") : nullptr, g);
      },
      .reference = [](const OpCase& c, const OpTensors& in) {
        const auto g = conv_geometry(c);
        const std::vector<double> x = in.values("x"), w = in.values("w"), dy = in.values("dy");
        std::vector<double> dw = in.values("dw"), dx = in.values("dx");
        if (!c.flag("accumulate_dw")) std::fill(dw.begin(), dw.end(), 0.0);
        if (c.flag("with_dx")) std::fill(dx.begin(), dx.end(), 0.0);
        for_each_tap(g, [&](int64_t n, int64_t ch, int64_t ki, int64_t kj, int64_t oh, int64_t ow, size_t pixel) {
          for (int64_t o = 0; o < kOutChannels; ++o) {
            const double grad = dy[output_index(g, n, o, oh, ow)];
            dw[weight_index(g, o, ch, ki, kj)] += grad * x[pixel];
            if (c.flag("with_dx")) dx[pixel] += grad * w[weight_index(g, o, ch, ki, kj)];
          }
        });
        return OpValues{{"dw", dw}, {"dx", dx}};
      },
  };
}

}  // namespace

std::vector<OpEntry> conv_op_entries() {
  return {im2col_entry(), col2im_entry(), permute_nos_entry(), conv2d_forward_entry(), conv2d_backward_entry()};
}

}  // namespace dpv::test
