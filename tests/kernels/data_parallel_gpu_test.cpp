// Whole DataParallel iterations on four virtual devices of one GPU (cuda:0x4) against four
// simulated CPU devices (cpu:4): outputs, loss, reduced gradients, the state after the step
// (running statistics included) and every device's BatchNorm statistics; per-device BatchNorm
// and SyncBatchNorm; float64 (tight) and float32 (rounding-level) models.
#include <gtest/gtest.h>

#include "engine/backend_registry.h"
#include "engine/data_parallel.h"
#include "engine/datasets.h"
#include "engine/error.h"
#include "engine/model_spec.h"
#include "tests/kernels/kernel_test_util.h"

namespace dpv::test {
namespace {

struct Result {
  std::vector<std::vector<double>> outputs;  // per iteration
  std::vector<double> losses;
  TensorMap grads;                           // host copies, last iteration
  TensorMap state;                           // host copy after the last step
  std::vector<BatchNormStats> bn;            // last iteration
};

Result run(const std::string& spec, const ModelSpec& model_spec, const Dataset& data, bool sync_bn, int steps) {
  auto devices = DeviceSet::create(spec);
  Model model(model_spec);
  TrainOptions options;
  options.optimizer.lr = 0.05;
  options.optimizer.momentum = 0.9;
  options.optimizer.weight_decay = 1e-4;
  options.sync_bn = sync_bn;
  const TensorMap initial = model.initial_state(1234);
  Trainer trainer(devices, std::move(model), initial, options);
  Result r;
  for (int s = 0; s < steps; ++s) {
    Iteration it(trainer, data.inputs, data.targets);
    it.run_to_end();
    r.outputs.push_back(it.output().to_doubles());
    r.losses.push_back(it.loss());
    r.bn = it.batchnorm_stats();
  }
  for (const auto& [name, t] : trainer.grads().items()) r.grads.set(name, t.to(nullptr));
  r.state = trainer.state_to_host();
  return r;
}

// Scale floor of the comparisons: the Linear biases before BatchNorm have gradients that are
// rounding noise (zero in exact arithmetic) on both backends.
constexpr double kFloor = 1e-2;

void expect_same(const Result& gpu_r, const Result& cpu_r, double rtol) {
  ASSERT_EQ(gpu_r.outputs.size(), cpu_r.outputs.size());
  for (size_t s = 0; s < cpu_r.outputs.size(); ++s) {
    EXPECT_TRUE(close(gpu_r.outputs[s], cpu_r.outputs[s], rtol, kFloor)) << "output of iteration " << s;
    EXPECT_NEAR(gpu_r.losses[s], cpu_r.losses[s], rtol * std::max(1.0, std::fabs(cpu_r.losses[s])))
        << "loss of iteration " << s;
  }
  ASSERT_EQ(gpu_r.grads.size(), cpu_r.grads.size());
  ASSERT_GT(cpu_r.grads.size(), 0u);
  for (const auto& [name, t] : cpu_r.grads.items())
    EXPECT_TRUE(close(gpu_r.grads.at(name, "the GPU gradients"), t, rtol, kFloor)) << "grad/" << name;
  ASSERT_EQ(gpu_r.state.size(), cpu_r.state.size());
  for (const auto& [name, t] : cpu_r.state.items()) {
    if (t.dtype() == DType::Int64) {  // num_batches_tracked
      EXPECT_EQ(gpu_r.state.at(name).to_int64(), t.to_int64()) << name;
      continue;
    }
    EXPECT_TRUE(close(gpu_r.state.at(name, "the GPU state"), t, rtol, kFloor)) << "state/" << name;
  }
  ASSERT_EQ(gpu_r.bn.size(), cpu_r.bn.size());
  for (size_t i = 0; i < cpu_r.bn.size(); ++i) {
    EXPECT_EQ(gpu_r.bn[i].layer, cpu_r.bn[i].layer);
    EXPECT_EQ(gpu_r.bn[i].device, cpu_r.bn[i].device);
    EXPECT_EQ(gpu_r.bn[i].count, cpu_r.bn[i].count);
    EXPECT_TRUE(close(gpu_r.bn[i].mean, cpu_r.bn[i].mean, rtol, kFloor)) << "bn mean, entry " << i;
    EXPECT_TRUE(close(gpu_r.bn[i].var, cpu_r.bn[i].var, rtol, kFloor)) << "bn var, entry " << i;
  }
}

ModelSpec with_dtype(ModelSpec spec, DType dt) {
  spec.dtype = dt;
  return spec;
}

class DataParallelGpu : public ::testing::TestWithParam<bool> {  // parameter: sync_bn
 protected:
  void SetUp() override { DPV_REQUIRE_GPU(); }
};

TEST_P(DataParallelGpu, MlpWithBatchNormMatchesCpuFloat64) {
  const bool sync_bn = GetParam();
  // 30 rows over 4 devices: torch.chunk gives 8, 8, 8, 6 (uneven: ceil(30/4) = 8 rows each, the last takes the rest).
  const Dataset data = make_blobs(30, 3, 2, 7, DType::Float64);
  const ModelSpec spec = with_dtype(preset_model("mlp-bn"), DType::Float64);
  const Result cpu_r = run("cpu:4", spec, data, sync_bn, 3);
  const Result gpu_r = run("cuda:0x4", spec, data, sync_bn, 3);
  expect_same(gpu_r, cpu_r, 1e-10);
}

TEST_P(DataParallelGpu, CnnMatchesCpuFloat32) {
  const bool sync_bn = GetParam();
  const Dataset data = make_images(12, 10, 3, 32, 32, 11, DType::Float32);
  const ModelSpec spec = with_dtype(preset_model("cnn"), DType::Float32);
  const Result cpu_r = run("cpu:4", spec, data, sync_bn, 2);
  const Result gpu_r = run("cuda:0x4", spec, data, sync_bn, 2);
  expect_same(gpu_r, cpu_r, 2e-3);
}

INSTANTIATE_TEST_SUITE_P(BatchNormModes, DataParallelGpu, ::testing::Values(false, true),
                         [](const auto& info) { return std::string(info.param ? "SyncBatchNorm" : "PerDeviceBatchNorm"); });

TEST(DataParallelGpuErrors, MissingGpuIsAClearError) {
  DPV_REQUIRE_GPU();
  const int n = cuda_device_count();
  try {
    DeviceSet::create("cuda:" + std::to_string(n));
    ADD_FAILURE() << "a spec naming GPU " << n << " was accepted on a machine with " << n;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(n)), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_cuda_backend(n + 5, 0), Error);
  EXPECT_THROW(cuda_device_name(-1), Error);
}

TEST(DataParallelGpuErrors, OutOfMemoryIsAnErrorNotAnAbort) {
  DPV_REQUIRE_GPU();
  auto set = DeviceSet::create("cuda:0");
  try {
    Tensor::empty({int64_t{1} << 46}, DType::Float32, set->shared(0));  // 256 TiB
    ADD_FAILURE() << "a 256 TiB allocation succeeded";
  } catch (const Error& e) {
    // cudaMallocAsync refuses a request larger than the GPU as cudaErrorMemoryAllocation or as
    // cudaErrorInvalidValue, depending on the driver: the backend reports both as out of memory.
    EXPECT_EQ(e.kind(), "OutOfMemoryError") << e.what();
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  // The GPU still works afterwards.
  Tensor t = Tensor::full({16}, DType::Float32, 3.0, set->shared(0));
  EXPECT_EQ(t.to_doubles()[15], 3.0);
}

TEST(DataParallelGpuErrors, BuildInfoNamesTheToolkit) {
  if (!cuda_compiled_in()) GTEST_SKIP() << "this build has no CUDA backend: " << cuda_build_info();
  const std::string info = cuda_build_info();
  EXPECT_NE(info.find("CUDA"), std::string::npos) << info;
  EXPECT_NE(info.find("NCCL"), std::string::npos) << info;
  if (cuda_device_count() > 0) {
    EXPECT_FALSE(cuda_device_name(0).empty());
  }
}

}  // namespace
}  // namespace dpv::test
