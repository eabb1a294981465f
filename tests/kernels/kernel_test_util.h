#pragma once
// Helpers of the backend tests: skipping without a GPU, random inputs, host/GPU copies and
// normwise relative comparison.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/device.h"
#include "engine/tensor.h"

// Every test starts with this: without a GPU it skips, saying why; with one it runs.
#define DPV_REQUIRE_GPU()                                                                          \
  do {                                                                                             \
    if (dpv::cuda_device_count() == 0)                                                             \
      GTEST_SKIP() << "no CUDA GPU on this machine (" << dpv::cuda_build_info()                    \
                   << "): the CUDA backend tests run only where a GPU exists";                     \
  } while (0)

namespace dpv::test {

// One GPU device (cuda:0) shared by the tests of a binary, made on first use.
inline std::shared_ptr<DeviceSet>& gpu_set_slot() {
  static std::shared_ptr<DeviceSet> set;
  return set;
}
inline std::shared_ptr<Device> gpu() {
  auto& set = gpu_set_slot();
  if (!set) set = DeviceSet::create("cuda:0");
  return set->shared(0);
}

// Releases that device (its stream, events and cuBLAS handle) after the last test, while the CUDA
// runtime is still up: destroying a cuBLAS handle during static teardown, after the runtime has
// begun to unload, is undefined.
class ReleaseGpuAfterTests : public ::testing::Environment {
 public:
  void TearDown() override { gpu_set_slot().reset(); }
};
inline const bool gpu_release_registered = (::testing::AddGlobalTestEnvironment(new ReleaseGpuAfterTests), true);

inline Backend& cpu_backend() {
  static std::unique_ptr<Backend> be = make_cpu_backend();
  return *be;
}

// Fresh random seed per run, printed with every failure (SCOPED_TRACE in the tests).
inline uint64_t fresh_seed() {
  static std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

inline std::vector<double> uniform(size_t n, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

// Host tensor of random values in [lo, hi).
inline Tensor random_host(const Shape& shape, DType dt, std::mt19937_64& rng, double lo = -1, double hi = 1) {
  return Tensor::from_doubles(shape, dt, uniform(static_cast<size_t>(shape_numel(shape)), lo, hi, rng));
}

inline Tensor to_gpu(const Tensor& host) { return host.to(gpu()); }

// max |got - ref| <= rtol * max(max |ref|, floor) (normwise), names the worst element on failure.
// The floor is for tensors that are rounding noise in exact arithmetic (the gradient of a Linear
// bias feeding a BatchNorm is zero: both backends hold noise there).
inline ::testing::AssertionResult close(const std::vector<double>& got, const std::vector<double>& ref, double rtol,
                                        double floor = 0) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << ref.size();
  double scale = 0;
  for (double r : ref) scale = std::max(scale, std::fabs(r));
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(ref[i]))
      return ::testing::AssertionFailure() << "NaN mismatch at " << i << ": " << got[i] << " vs " << ref[i];
    if (std::isnan(ref[i])) continue;
    const double d = std::fabs(got[i] - ref[i]);
    if (d > worst) {
      worst = d;
      at = i;
    }
  }
  const double bound = rtol * std::max({scale, floor, 1e-300});
  if (worst <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max error " << worst << " at element " << at << " (got " << got[at]
                                       << ", reference " << ref[at] << ") exceeds " << rtol << " x max|ref| " << scale;
}

inline ::testing::AssertionResult close(const Tensor& got, const Tensor& ref, double rtol, double floor = 0) {
  return close(got.to_doubles(), ref.to_doubles(), rtol, floor);
}

inline const char* dtype_label(DType dt) { return dt == DType::Float32 ? "float32" : "float64"; }

// Base of the GPU suites parameterised on the dtype (the per-op checks are the op table's,
// op_table.h): skips without a GPU, seeds a fresh generator per test (printed on failure through
// SCOPED_TRACE in each test).
class GpuParity : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0)
      GTEST_SKIP() << "no CUDA GPU on this machine (" << cuda_build_info()
                   << "): the CUDA backend tests run only where a GPU exists";
    seed_ = fresh_seed();
    rng_.seed(seed_);
  }
  DType dt() const { return GetParam(); }
  Backend& gpu_be() { return gpu()->backend(); }
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace dpv::test
