// The op table (op_table.h) against every backend there is, one test per entry and dtype:
//   CpuMatchesReference   the CPU backend against the double-precision reference: every machine;
//   CudaMatchesReference  the CUDA backend against the same reference: skips without a GPU;
//   CudaMatchesCpu        the two backends on the same inputs: skips without a GPU.
// Fresh random inputs every run; the seed is printed with any failure, and DPV_OP_TABLE_SEED=<seed>
// makes a run use it again. DPV_OP_TABLE_SKIP_LARGE=1 leaves out the cases of millions of elements
// (for slow tools: compute-sanitizer, valgrind).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <ostream>
#include <set>
#include <string>

#include "engine/error.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/op_table.h"

namespace dpv::test {
namespace {

struct OpParam {
  const OpEntry* entry;
  DType dtype;
};
// Names the entry in gtest's messages instead of the struct's bytes.
void PrintTo(const OpParam& p, std::ostream* os) { *os << p.entry->name << " in " << dtype_label(p.dtype); }

std::vector<OpParam> every_entry_and_dtype() {
  std::vector<OpParam> params;
  for (const OpEntry& e : op_table())
    for (DType dt : {DType::Float32, DType::Float64}) params.push_back({&e, dt});
  return params;
}

uint64_t seed_for_this_run() {
  if (const char* fixed = std::getenv("DPV_OP_TABLE_SEED")) return std::strtoull(fixed, nullptr, 10);
  return fresh_seed();
}

// Where a backend's tensors live: the CPU backend works on host tensors, the CUDA one on cuda:0.
struct BackendUnderTest {
  Backend* backend;
  std::shared_ptr<Device> device;  // null: the host
};
BackendUnderTest cpu_under_test() { return {&cpu_backend(), nullptr}; }
BackendUnderTest cuda_under_test() { return {&gpu()->backend(), gpu()}; }

// Where the expected value is exactly 0 the result must be too, whatever the tolerance: those are
// structural zeros (a convolution's padding, ReLU's cut, an ignored row's gradient, a zeroed
// output), which no summation order or rounding excuses.
::testing::AssertionResult zeros_kept(const std::vector<double>& got, const std::vector<double>& expected) {
  if (got.size() != expected.size()) return ::testing::AssertionSuccess();  // close() reports it
  for (size_t i = 0; i < got.size(); ++i)
    if (expected[i] == 0 && got[i] != 0)
      return ::testing::AssertionFailure() << "element " << i << " is " << got[i] << " where 0 is expected";
  return ::testing::AssertionSuccess();
}

// Every output the entry names, within rtol of the expected values (normwise, NaN where expected).
// Against the reference, its zeros are structural and must be kept; against another backend they
// need not be (a float32 result may round to 0 where the other's is tiny).
enum class Against { Reference, OtherBackend };
void expect_outputs_close(const OpEntry& entry, const OpValues& got, const OpValues& expected, double rtol,
                          Against against = Against::Reference) {
  for (const std::string& name : entry.outputs) {
    ASSERT_TRUE(expected.count(name)) << "the reference does not give " << name;
    EXPECT_TRUE(close(got.at(name), expected.at(name), rtol)) << name;
    if (against == Against::Reference) {
      EXPECT_TRUE(zeros_kept(got.at(name), expected.at(name))) << name;
    }
  }
}

// The comparison can fail: an error of one part in a thousand of the largest value, put into any
// one output, exceeds the entry's tolerance. (Guards against a tolerance loosened until it hides
// everything, and against outputs the reference leaves empty.)
void expect_an_error_is_caught(const OpEntry& entry, const OpValues& got, const OpValues& expected, double rtol) {
  for (const std::string& name : entry.outputs) {
    std::vector<double> wrong = expected.at(name);
    double scale = 0;
    size_t largest = wrong.size();
    for (size_t i = 0; i < wrong.size(); ++i)
      if (std::isfinite(wrong[i]) && std::fabs(wrong[i]) >= scale) {
        scale = std::fabs(wrong[i]);
        largest = i;
      }
    if (largest == wrong.size()) continue;  // empty or all NaN: nothing to get wrong
    wrong[largest] += 1e-3 * std::max(scale, 1.0);
    EXPECT_FALSE(close(got.at(name), wrong, rtol)) << name << ": an error of 1e-3 went unnoticed";
  }
}

class OpTable : public ::testing::TestWithParam<OpParam> {
 protected:
  void SetUp() override {
    seed_ = seed_for_this_run();
    rng_.seed(seed_);
  }
  const OpEntry& entry() const { return *GetParam().entry; }
  DType dt() const { return GetParam().dtype; }
  double rtol() const { return entry().tolerance.of(dt()); }
  // Runs `check(case, inputs)` on every case, its inputs drawn in turn from this test's generator.
  template <typename Check>
  void for_each_case(Check&& check) {
    SCOPED_TRACE("seed " + std::to_string(seed_) + " (DPV_OP_TABLE_SEED), " + entry().name + ", " + dtype_label(dt()));
    const char* skip_large = std::getenv("DPV_OP_TABLE_SKIP_LARGE");
    for (const OpCase& c : entry().cases) {
      if (c.flag("large") && skip_large && std::string(skip_large) == "1") continue;
      SCOPED_TRACE("case " + c.label);
      const OpTensors inputs = entry().make(c, dt(), rng_);
      check(c, inputs);
    }
  }
  OpValues run_on(const BackendUnderTest& b, const OpCase& c, const OpTensors& inputs) {
    return run_op(entry(), c, inputs, *b.backend, b.device);
  }

  uint64_t seed_ = 0;
  Rng rng_;
};

TEST_P(OpTable, CpuMatchesReference) {
  for_each_case([&](const OpCase& c, const OpTensors& inputs) {
    const OpValues expected = entry().reference(c, inputs);
    const OpValues got = run_on(cpu_under_test(), c, inputs);
    expect_outputs_close(entry(), got, expected, rtol());
    expect_an_error_is_caught(entry(), got, expected, rtol());
  });
}

TEST_P(OpTable, CudaMatchesReference) {
  DPV_REQUIRE_GPU();
  for_each_case([&](const OpCase& c, const OpTensors& inputs) {
    expect_outputs_close(entry(), run_on(cuda_under_test(), c, inputs), entry().reference(c, inputs), rtol());
  });
}

// Both backends lie within the tolerance of the reference, so within twice it of each other.
TEST_P(OpTable, CudaMatchesCpu) {
  DPV_REQUIRE_GPU();
  for_each_case([&](const OpCase& c, const OpTensors& inputs) {
    const OpValues cpu = run_on(cpu_under_test(), c, inputs);
    expect_outputs_close(entry(), run_on(cuda_under_test(), c, inputs), cpu, 2 * rtol(), Against::OtherBackend);
  });
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTable, ::testing::ValuesIn(every_entry_and_dtype()),
                         [](const ::testing::TestParamInfo<OpParam>& info) {
                           return info.param.entry->name + "_" + dtype_label(info.param.dtype);
                         });

// Every compute op of engine/backend.h has an entry (the memory ops, fill aside, are exercised by
// every copy the table makes; their GPU specifics are in backend_device_gpu_test.cpp).
TEST(OpTableCoverage, EveryBackendOpHasAnEntry) {
  std::set<std::string> names;
  for (const OpEntry& e : op_table()) {
    EXPECT_TRUE(names.insert(e.name).second) << "two entries named " << e.name;
    EXPECT_FALSE(e.cases.empty()) << e.name;
    EXPECT_FALSE(e.outputs.empty()) << e.name;
  }
  for (const char* op : {"fill", "gemm", "add_channel_bias", "sum_channels", "add_inplace", "addcmul_inplace",
                         "scale_inplace", "relu_forward", "relu_backward", "im2col", "col2im", "permute_nos",
                         "conv2d_forward", "conv2d_backward", "bn_stats", "bn_normalize", "bn_backward_reduce",
                         "bn_backward_elemt", "bn_normalize_relu", "bn_relu_backward", "bn_gather_stats",
                         "bn_invstd", "bn_update_running", "cross_entropy", "sgd_update", "adam_update"})
    EXPECT_TRUE(names.count(op)) << "no entry for Backend::" << op;
}

// A target outside [0, K) other than ignore_index (-100) is PyTorch's IndexError on every backend;
// the CUDA device is still usable afterwards (no sticky error).
struct BackendAndDtype {
  bool cuda;
  DType dtype;
};
void PrintTo(const BackendAndDtype& p, std::ostream* os) { *os << (p.cuda ? "cuda " : "cpu ") << dtype_label(p.dtype); }

class CrossEntropyTargetErrors : public ::testing::TestWithParam<BackendAndDtype> {};

TEST_P(CrossEntropyTargetErrors, OutOfRangeTargetIsAnIndexError) {
  const DType dt = GetParam().dtype;
  if (GetParam().cuda) DPV_REQUIRE_GPU();
  const BackendUnderTest b = GetParam().cuda ? cuda_under_test() : cpu_under_test();
  const int64_t N = 9, K = 5;
  Tensor logits = Tensor::zeros({N, K}, dt, b.device);
  Tensor loss = Tensor::empty({1}, dt, b.device), dlogits = Tensor::empty({N, K}, dt, b.device);
  for (int64_t bad : {int64_t{5}, int64_t{-1}, int64_t{-101}}) {  // -100 is ignore_index, not an error
    std::vector<int64_t> t(N, 1);
    t[6] = bad;
    Tensor target = Tensor::from_int64({N}, t).to(b.device);
    try {
      b.backend->cross_entropy(logits, target, loss, dlogits, 1.0);
      ADD_FAILURE() << "target " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), "IndexError");
      EXPECT_EQ(std::string(e.what()), "Target " + std::to_string(bad) + " is out of bounds.");
    }
  }
  Tensor target = Tensor::from_int64({N}, std::vector<int64_t>(N, 2)).to(b.device);
  b.backend->cross_entropy(logits, target, loss, dlogits, 1.0);
  EXPECT_NEAR(loss.item(), std::log(5.0), 1e-6) << "equal logits over 5 classes";
}

INSTANTIATE_TEST_SUITE_P(Backends, CrossEntropyTargetErrors,
                         ::testing::Values(BackendAndDtype{false, DType::Float32}, BackendAndDtype{false, DType::Float64},
                                           BackendAndDtype{true, DType::Float32}, BackendAndDtype{true, DType::Float64}),
                         [](const ::testing::TestParamInfo<BackendAndDtype>& info) {
                           return std::string(info.param.cuda ? "cuda_" : "cpu_") + dtype_label(info.param.dtype);
                         });

}  // namespace
}  // namespace dpv::test
