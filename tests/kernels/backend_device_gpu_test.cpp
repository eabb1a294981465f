// What the CUDA backend does besides computing, which the op table (op_table_test.cpp) does not
// cover: copies between virtual devices of one GPU, its clock, and the errors it raises for
// operands it cannot use. Skips without a GPU.
#include <gtest/gtest.h>

#include "engine/error.h"
#include "tests/kernels/kernel_test_util.h"

namespace dpv::test {
namespace {

class GpuDevice : public GpuParity {};

TEST_P(GpuDevice, CopiesRoundTripThroughVirtualDevices) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  auto set = DeviceSet::create("cuda:0x2");
  Tensor host = random_host({513}, dt(), rng_);
  Tensor on0 = host.to(set->shared(0));   // host -> device
  Tensor on1 = on0.to(set->shared(1));    // device -> device (same GPU, other virtual device)
  EXPECT_NE(on0.raw(), on1.raw()) << "virtual devices must hold separate allocations";
  EXPECT_EQ(set->shared(1)->memory().current.load(), static_cast<int64_t>(on1.nbytes()));
  EXPECT_TRUE(close(on1, host, 0));       // device -> host inside to_doubles
}

TEST_P(GpuDevice, ClockAdvances) {
  const double a = gpu_be().now();
  Tensor t = Tensor::zeros({1 << 20}, dt(), gpu());
  for (int i = 0; i < 20; ++i) gpu_be().scale_inplace(t, 1.0);
  const double b = gpu_be().now();
  EXPECT_GT(b, a);
  EXPECT_LT(b - a, 60.0);
}

TEST_P(GpuDevice, BadInputsBecomeErrors) {
  Tensor a = Tensor::zeros({4, 4}, dt(), gpu());
  Tensor host = Tensor::zeros({4, 4}, dt());
  Tensor c = Tensor::zeros({4, 4}, dt(), gpu());
  EXPECT_THROW(gpu_be().gemm(false, false, 4, 4, 4, 1, a, host, 0, c), Error);  // operand in host memory
  Tensor small = Tensor::zeros({3}, dt(), gpu());
  EXPECT_THROW(gpu_be().add_inplace(c, small), Error);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuDevice, ::testing::Values(DType::Float32, DType::Float64),
                         [](const auto& info) { return std::string(dtype_label(info.param)); });

}  // namespace
}  // namespace dpv::test
