// The CPU backend's float32 convolutions (oneDNN) against the im2col + GEMM reference (Backend's
// default conv2d_*, called past the override), pass by pass, on shapes that exercise padding,
// strides whose last window stops short of the edge, 1x1 and 5x5 kernels and single samples.
// float64 has no oneDNN path and must give the reference's numbers exactly. With and without a
// bias (folded into oneDNN's primitives).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/datasets.h"
#include "engine/tensor.h"

namespace dpv {
namespace {

struct ConvCase {
  int64_t N, C, H, W, O, k, stride, pad;
};

std::string case_name(const ConvCase& c) {
  std::ostringstream os;
  os << "N" << c.N << " C" << c.C << " " << c.H << "x" << c.W << " O" << c.O << " k" << c.k << " s" << c.stride
     << " p" << c.pad;
  return os.str();
}

Backend::ConvGeometry geometry(const ConvCase& c) {
  const int64_t oh = (c.H + 2 * c.pad - c.k) / c.stride + 1, ow = (c.W + 2 * c.pad - c.k) / c.stride + 1;
  return {c.N, c.C, c.H, c.W, c.k, c.k, c.stride, c.pad, oh, ow};
}

Tensor random_tensor(const Shape& shape, DType dtype, Rng& rng) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (double& x : v) x = rng.uniform(-1.0, 1.0);
  return Tensor::from_doubles(shape, dtype, v);
}

// Largest |a - b| relative to the largest |b| (1 when b is all zeros).
double relative_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> va = a.to_doubles(), vb = b.to_doubles();
  EXPECT_EQ(va.size(), vb.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < va.size() && i < vb.size(); ++i) {
    worst = std::max(worst, std::abs(va[i] - vb[i]));
    scale = std::max(scale, std::abs(vb[i]));
  }
  return worst / (scale > 0 ? scale : 1.0);
}

const ConvCase kCases[] = {
    {32, 3, 32, 32, 8, 3, 1, 1},   // the cnn preset's first layer
    {32, 8, 32, 32, 16, 3, 2, 1},  // and its second
    {3, 5, 9, 7, 4, 3, 2, 0},      // stride 2 stops one column short of the edge: right padding < left
    {2, 4, 11, 11, 6, 5, 1, 2},
    {1, 16, 6, 6, 7, 1, 1, 0},     // 1x1, one sample
    {4, 17, 8, 10, 19, 3, 3, 1},   // channels no blocking divides
};

class Conv2dOnednn : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dOnednn, MatchesIm2colReferenceInFloat32) {
  const ConvCase c = GetParam();
  SCOPED_TRACE(case_name(c));
  const auto g = geometry(c);
  auto backend = make_cpu_backend();
  Rng rng(11);
  const Tensor x = random_tensor({c.N, c.C, c.H, c.W}, DType::Float32, rng);
  const Tensor w = random_tensor({c.O, c.C, c.k, c.k}, DType::Float32, rng);
  const Tensor dy = random_tensor({c.N, c.O, g.OH, g.OW}, DType::Float32, rng);

  Tensor y = Tensor::empty({c.N, c.O, g.OH, g.OW}, DType::Float32), saved;
  Tensor y_ref = Tensor::empty(y.shape(), DType::Float32), saved_ref;
  backend->conv2d_forward(x, w, nullptr, y, saved, g);
  backend->Backend::conv2d_forward(x, w, nullptr, y_ref, saved_ref, g);
  EXPECT_LT(relative_difference(y, y_ref), 1e-5) << "forward";

  // Weight gradient, overwritten then accumulated onto a non-zero start; input gradient.
  const Tensor start = random_tensor(w.shape(), DType::Float32, rng);
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulate" : "overwrite");
    Tensor dw = start.clone(), dw_ref = start.clone();
    Tensor dx = Tensor::full(x.shape(), DType::Float32, 7.0), dx_ref = Tensor::empty(x.shape(), DType::Float32);
    backend->conv2d_backward(x, saved, w, dy, dw, accumulate, &dx, g);
    backend->Backend::conv2d_backward(x, saved_ref, w, dy, dw_ref, accumulate, &dx_ref, g);
    EXPECT_LT(relative_difference(dw, dw_ref), 1e-5) << "weight gradient";
    EXPECT_LT(relative_difference(dx, dx_ref), 1e-5) << "input gradient";
  }
  // Without an input gradient only dw is written.
  Tensor dw = Tensor::empty(w.shape(), DType::Float32), dw_ref = Tensor::empty(w.shape(), DType::Float32);
  backend->conv2d_backward(x, saved, w, dy, dw, false, nullptr, g);
  backend->Backend::conv2d_backward(x, saved_ref, w, dy, dw_ref, false, nullptr, g);
  EXPECT_LT(relative_difference(dw, dw_ref), 1e-5) << "weight gradient without dx";
}

TEST_P(Conv2dOnednn, BiasInTheConvolutionMatchesTheReference) {
  // oneDNN adds the bias inside its convolution; the reference adds it after (add_channel_bias).
  // The same backend runs both with and without a bias, so each has its own cached primitive.
  const ConvCase c = GetParam();
  SCOPED_TRACE(case_name(c));
  const auto g = geometry(c);
  auto backend = make_cpu_backend();
  Rng rng(17);
  const Tensor x = random_tensor({c.N, c.C, c.H, c.W}, DType::Float32, rng);
  const Tensor w = random_tensor({c.O, c.C, c.k, c.k}, DType::Float32, rng);
  Tensor bias = random_tensor({c.O}, DType::Float32, rng);
  for (int i = 0; i < c.O; ++i) bias.data<float>()[i] += 3.0f;  // well away from 0: a dropped bias shows
  Tensor y_plain = Tensor::empty({c.N, c.O, g.OH, g.OW}, DType::Float32), saved;
  Tensor y = Tensor::empty(y_plain.shape(), DType::Float32), y_ref = Tensor::empty(y_plain.shape(), DType::Float32);
  backend->conv2d_forward(x, w, nullptr, y_plain, saved, g);
  backend->conv2d_forward(x, w, &bias, y, saved, g);
  backend->Backend::conv2d_forward(x, w, &bias, y_ref, saved, g);
  EXPECT_LT(relative_difference(y, y_ref), 1e-5);
  const std::vector<double> with = y.to_doubles(), without = y_plain.to_doubles();
  const int64_t S = g.OH * g.OW;
  for (size_t i = 0; i < with.size(); ++i) {
    const double b = bias.data<float>()[(static_cast<int64_t>(i) / S) % c.O];
    ASSERT_NEAR(with[i] - without[i], b, 1e-4) << "element " << i;
  }
}

TEST_P(Conv2dOnednn, RepeatedCallsReuseNothingStale) {
  // Primitives and staged buffers are cached per shape: a second call with new values must see
  // the new values.
  const ConvCase c = GetParam();
  SCOPED_TRACE(case_name(c));
  const auto g = geometry(c);
  auto backend = make_cpu_backend();
  Rng rng(5);
  for (int round = 0; round < 2; ++round) {
    const Tensor x = random_tensor({c.N, c.C, c.H, c.W}, DType::Float32, rng);
    const Tensor w = random_tensor({c.O, c.C, c.k, c.k}, DType::Float32, rng);
    Tensor y = Tensor::empty({c.N, c.O, g.OH, g.OW}, DType::Float32), saved;
    Tensor y_ref = Tensor::empty(y.shape(), DType::Float32), saved_ref;
    backend->conv2d_forward(x, w, nullptr, y, saved, g);
    backend->Backend::conv2d_forward(x, w, nullptr, y_ref, saved_ref, g);
    EXPECT_LT(relative_difference(y, y_ref), 1e-5) << "round " << round;
    // The backward stages dy once for both of its passes: a new dy must reach both.
    const Tensor dy = random_tensor(y.shape(), DType::Float32, rng);
    Tensor dw = Tensor::empty(w.shape(), DType::Float32), dw_ref = Tensor::empty(w.shape(), DType::Float32);
    Tensor dx = Tensor::empty(x.shape(), DType::Float32), dx_ref = Tensor::empty(x.shape(), DType::Float32);
    backend->conv2d_backward(x, saved, w, dy, dw, false, &dx, g);
    backend->Backend::conv2d_backward(x, saved_ref, w, dy, dw_ref, false, &dx_ref, g);
    EXPECT_LT(relative_difference(dw, dw_ref), 1e-5) << "weight gradient, round " << round;
    EXPECT_LT(relative_difference(dx, dx_ref), 1e-5) << "input gradient, round " << round;
  }
}

TEST_P(Conv2dOnednn, Float64KeepsTheIm2colPathExactly) {
  const ConvCase c = GetParam();
  SCOPED_TRACE(case_name(c));
  const auto g = geometry(c);
  auto backend = make_cpu_backend();
  Rng rng(3);
  const Tensor x = random_tensor({c.N, c.C, c.H, c.W}, DType::Float64, rng);
  const Tensor w = random_tensor({c.O, c.C, c.k, c.k}, DType::Float64, rng);
  const Tensor dy = random_tensor({c.N, c.O, g.OH, g.OW}, DType::Float64, rng);
  Tensor y = Tensor::empty({c.N, c.O, g.OH, g.OW}, DType::Float64), saved;
  Tensor y_ref = Tensor::empty(y.shape(), DType::Float64), saved_ref;
  backend->conv2d_forward(x, w, nullptr, y, saved, g);
  backend->Backend::conv2d_forward(x, w, nullptr, y_ref, saved_ref, g);
  EXPECT_EQ(y.to_doubles(), y_ref.to_doubles());
  Tensor dw = Tensor::empty(w.shape(), DType::Float64), dw_ref = Tensor::empty(w.shape(), DType::Float64);
  Tensor dx = Tensor::empty(x.shape(), DType::Float64), dx_ref = Tensor::empty(x.shape(), DType::Float64);
  backend->conv2d_backward(x, saved, w, dy, dw, false, &dx, g);
  backend->Backend::conv2d_backward(x, saved_ref, w, dy, dw_ref, false, &dx_ref, g);
  EXPECT_EQ(dw.to_doubles(), dw_ref.to_doubles());
  EXPECT_EQ(dx.to_doubles(), dx_ref.to_doubles());
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv2dOnednn, ::testing::ValuesIn(kCases));

}  // namespace
}  // namespace dpv
