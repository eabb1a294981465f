// CUDA backend vs CPU backend, operation by operation (part one): fill, copies, clock, gemm,
// bias, channel sums, in-place arithmetic, ReLU and the convolution helpers. Fresh random
// inputs every run; the seed is printed with any failure.
#include <gtest/gtest.h>

#include "engine/error.h"
#include "tests/kernels/kernel_test_util.h"

namespace dpv::test {
namespace {

class DenseParity : public GpuParity {};

TEST_P(DenseParity, Fill) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  Tensor t = Tensor::empty({1000, 3}, dt(), gpu());
  gpu_be().fill(t, 2.5);
  Tensor ref = Tensor::empty({1000, 3}, dt());
  cpu_backend().fill(ref, 2.5);
  EXPECT_TRUE(close(t, ref, 0));
  Tensor ids = Tensor::empty({77}, DType::Int64, gpu());
  gpu_be().fill(ids, 7);
  for (int64_t v : ids.to_int64()) ASSERT_EQ(v, 7);
}

TEST_P(DenseParity, CopiesRoundTripThroughVirtualDevices) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  auto set = DeviceSet::create("cuda:0x2");
  Tensor host = random_host({513}, dt(), rng_);
  Tensor on0 = host.to(set->shared(0));   // host -> device
  Tensor on1 = on0.to(set->shared(1));    // device -> device (same GPU, other virtual device)
  EXPECT_NE(on0.raw(), on1.raw()) << "virtual devices must hold separate allocations";
  EXPECT_EQ(set->shared(1)->memory().current.load(), static_cast<int64_t>(on1.nbytes()));
  EXPECT_TRUE(close(on1, host, 0));       // device -> host inside to_doubles
}

TEST_P(DenseParity, ClockAdvances) {
  const double a = gpu_be().now();
  Tensor t = Tensor::zeros({1 << 20}, dt(), gpu());
  for (int i = 0; i < 20; ++i) gpu_be().scale_inplace(t, 1.0);
  const double b = gpu_be().now();
  EXPECT_GT(b, a);
  EXPECT_LT(b - a, 60.0);
}

TEST_P(DenseParity, GemmAllTransposes) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const int64_t M = 37, N = 53, K = 129;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::string("trans_a ") + (ta ? "1" : "0") + " trans_b " + (tb ? "1" : "0"));
      Tensor a = random_host(ta ? Shape{K, M} : Shape{M, K}, dt(), rng_);
      Tensor b = random_host(tb ? Shape{N, K} : Shape{K, N}, dt(), rng_);
      Tensor c = random_host({M, N}, dt(), rng_);
      Tensor ga = to_gpu(a), gb = to_gpu(b), gc = to_gpu(c);
      cpu_backend().gemm(ta, tb, M, N, K, 0.75, a, b, 0.5, c);
      gpu_be().gemm(ta, tb, M, N, K, 0.75, ga, gb, 0.5, gc);
      EXPECT_TRUE(close(gc, c, tol(dt(), true)));
    }
}

TEST_P(DenseParity, GemmTrainingSizes) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const int64_t M = 256, N = 384, K = 512;  // a Linear layer's forward: x [M,K] @ W^T, W [N,K]
  Tensor x = random_host({M, K}, dt(), rng_), w = random_host({N, K}, dt(), rng_);
  Tensor y = Tensor::zeros({M, N}, dt()), gy = Tensor::zeros({M, N}, dt(), gpu());
  cpu_backend().gemm(false, true, M, N, K, 1.0, x, w, 0.0, y);
  gpu_be().gemm(false, true, M, N, K, 1.0, to_gpu(x), to_gpu(w), 0.0, gy);
  EXPECT_TRUE(close(gy, y, tol(dt(), true)));
}

TEST_P(DenseParity, ChannelBiasAndSums) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  for (int64_t S : {int64_t{1}, int64_t{49}}) {
    SCOPED_TRACE("S = " + std::to_string(S));
    const int64_t R = 19, C = 70;
    Tensor y = random_host({R, C, S}, dt(), rng_), bias = random_host({C}, dt(), rng_);
    Tensor gy = to_gpu(y);
    cpu_backend().add_channel_bias(y, bias, R, C, S);
    gpu_be().add_channel_bias(gy, to_gpu(bias), R, C, S);
    EXPECT_TRUE(close(gy, y, tol(dt(), false)));
    for (bool accumulate : {false, true}) {
      Tensor out = random_host({C}, dt(), rng_);
      Tensor gout = to_gpu(out);
      cpu_backend().sum_channels(y, out, R, C, S, accumulate);
      gpu_be().sum_channels(gy, gout, R, C, S, accumulate);
      EXPECT_TRUE(close(gout, out, tol(dt(), true))) << "accumulate " << accumulate;
    }
  }
}

TEST_P(DenseParity, AddAndScaleInPlace) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  // 1003 elements: the vectorised float32 path plus its 3-element tail; the view starting one
  // element in is not 16-byte aligned and takes the scalar path.
  Tensor dst = random_host({1003}, dt(), rng_), src = random_host({1003}, dt(), rng_);
  Tensor gdst = to_gpu(dst), gsrc = to_gpu(src);
  cpu_backend().add_inplace(dst, src);
  gpu_be().add_inplace(gdst, gsrc);
  EXPECT_TRUE(close(gdst, dst, tol(dt(), false)));
  Tensor view = gdst.slice0(1, 1003), sview = gsrc.slice0(1, 1003);
  Tensor hview = dst.slice0(1, 1003), hsview = src.slice0(1, 1003);
  cpu_backend().add_inplace(hview, hsview);
  gpu_be().add_inplace(view, sview);
  EXPECT_TRUE(close(gdst, dst, tol(dt(), false)));
  cpu_backend().scale_inplace(dst, -0.3);
  gpu_be().scale_inplace(gdst, -0.3);
  EXPECT_TRUE(close(gdst, dst, tol(dt(), false)));
}

TEST_P(DenseParity, Relu) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  Tensor x = random_host({64, 33}, dt(), rng_);
  Tensor y = Tensor::empty({64, 33}, dt()), gy = Tensor::empty({64, 33}, dt(), gpu());
  cpu_backend().relu_forward(x, y);
  gpu_be().relu_forward(to_gpu(x), gy);
  EXPECT_TRUE(close(gy, y, 0));
  Tensor dy = random_host({64, 33}, dt(), rng_);
  Tensor dx = Tensor::empty({64, 33}, dt()), gdx = Tensor::empty({64, 33}, dt(), gpu());
  cpu_backend().relu_backward(y, dy, dx);
  gpu_be().relu_backward(gy, to_gpu(dy), gdx);
  EXPECT_TRUE(close(gdx, dx, 0));
}

TEST_P(DenseParity, Im2colCol2imPermute) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  for (int64_t stride : {int64_t{1}, int64_t{2}}) {
    Backend::ConvGeometry g{3, 4, 9, 7, 3, 3, stride, 1, 0, 0};
    g.OH = (g.H + 2 * g.pad - g.kh) / g.stride + 1;
    g.OW = (g.W + 2 * g.pad - g.kw) / g.stride + 1;
    const Shape col_shape{g.N, g.C * g.kh * g.kw, g.OH * g.OW};
    Tensor x = random_host({g.N, g.C, g.H, g.W}, dt(), rng_);
    Tensor col = Tensor::empty(col_shape, dt()), gcol = Tensor::empty(col_shape, dt(), gpu());
    cpu_backend().im2col(x, col, g);
    gpu_be().im2col(to_gpu(x), gcol, g);
    EXPECT_TRUE(close(gcol, col, 0)) << "im2col stride " << stride;
    Tensor dcol = random_host(col_shape, dt(), rng_);
    Tensor dx = random_host({g.N, g.C, g.H, g.W}, dt(), rng_);  // garbage: col2im must overwrite it
    Tensor gdx = to_gpu(dx);
    cpu_backend().col2im(dcol, dx, g);
    gpu_be().col2im(to_gpu(dcol), gdx, g);
    EXPECT_TRUE(close(gdx, dx, tol(dt(), true))) << "col2im stride " << stride;
  }
  const int64_t A = 5, B = 6, S = 11;
  Tensor src = random_host({A, B, S}, dt(), rng_);
  Tensor dst = Tensor::empty({B, A, S}, dt()), gdst = Tensor::empty({B, A, S}, dt(), gpu());
  cpu_backend().permute_nos(src, dst, A, B, S);
  gpu_be().permute_nos(to_gpu(src), gdst, A, B, S);
  EXPECT_TRUE(close(gdst, dst, 0));
}

TEST_P(DenseParity, BadInputsBecomeErrors) {
  Tensor a = Tensor::zeros({4, 4}, dt(), gpu());
  Tensor host = Tensor::zeros({4, 4}, dt());
  Tensor c = Tensor::zeros({4, 4}, dt(), gpu());
  EXPECT_THROW(gpu_be().gemm(false, false, 4, 4, 4, 1, a, host, 0, c), Error);  // operand in host memory
  Tensor small = Tensor::zeros({3}, dt(), gpu());
  EXPECT_THROW(gpu_be().add_inplace(c, small), Error);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, DenseParity, ::testing::Values(DType::Float32, DType::Float64),
                         [](const auto& info) { return std::string(dtype_label(info.param)); });

}  // namespace
}  // namespace dpv::test
