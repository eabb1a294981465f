// The engine's sharded strategies against REAL ZeroRedundancyOptimizer over DistributedDataParallel:
// every folder under tests/fixtures/zero was recorded by tests/fixtures/make_zero_fixtures.py
// (PyTorch 1.13, Gloo, W CPU processes). The in-process driver runs the same steps with each ZeRO
// stage, and ddp_step_output (what `dpv step --zero S` writes) must hold exactly the tensors of
// expected.safetensors (ZeRO-1), or its common part plus flat.safetensors (ZeRO-2/3: FSDP's flat
// slices, derived from the same run because PyTorch 1.13's FSDP does not import on this Python),
// with the same partition or flat layout metadata.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/ddp/ddp.h"
#include "engine/ddp/ddp_output.h"
#include "engine/device.h"
#include "engine/io/safetensors.h"
#include "tests/engine/fixture_support.h"
#include "engine/model_spec.h"
#include "engine/optim/optimizer.h"

namespace dpv {
namespace {

namespace fs = std::filesystem;

fs::path zero_fixtures() { return test::fixture_dir("zero"); }
std::vector<std::string> zero_cases() { return test::fixture_cases("zero"); }
using test::metadata_of;

DdpOptions options_of(const nlohmann::json& c, int zero) {
  DdpOptions o;
  o.zero_stage = zero;
  o.optimizer.kind = parse_optimizer_kind(c.at("optimizer").get<std::string>());
  o.optimizer.lr = c.at("lr").get<double>();
  o.optimizer.momentum = c.at("momentum").get<double>();
  o.optimizer.weight_decay = c.at("weight_decay").get<double>();
  if (c.contains("betas")) {
    o.optimizer.beta1 = c.at("betas").at(0).get<double>();
    o.optimizer.beta2 = c.at("betas").at(1).get<double>();
    o.optimizer.eps = c.at("eps").get<double>();
  }
  return o;
}

bool is_optim_state(const std::string& name) { return name.find("/optim/") != std::string::npos; }

// Every tensor of `want` in `got` (and no other), same shape and dtype, within tolerance.
void expect_tensors(const TensorMap& got, const TensorMap& want, DType dtype, const std::string& what) {
  std::vector<std::string> want_names = want.names(), got_names = got.names();
  std::sort(want_names.begin(), want_names.end());
  std::sort(got_names.begin(), got_names.end());
  EXPECT_EQ(got_names, want_names) << what;
  // float64 agrees to ~1e-15; float32 as the DDP fixtures (the rings add in different orders).
  const double rtol = dtype == DType::Float64 ? 1e-10 : 1e-3, atol = dtype == DType::Float64 ? 1e-10 : 5e-5;
  for (const auto& [name, w] : want.items()) {
    const Tensor* g = got.find(name);
    if (!g) continue;
    ASSERT_EQ(g->shape(), w.shape()) << what << " " << name;
    ASSERT_EQ(g->dtype(), w.dtype()) << what << " " << name;
    const auto gv = g->to_doubles(), wv = w.to_doubles();
    int bad = 0;
    size_t at = 0;
    for (size_t i = 0; i < wv.size(); ++i)
      if (!(std::abs(gv[i] - wv[i]) <= atol + rtol * std::abs(wv[i]))) ++bad, at = i;
    EXPECT_EQ(bad, 0) << what << ": " << name << " e.g. [" << at << "] engine " << gv[at] << " torch " << wv[at];
  }
}

class ZeroPyTorchFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(ZeroPyTorchFixture, EveryStageMatchesRealZeroRedundancyOptimizer) {
  const fs::path dir = zero_fixtures() / GetParam();
  nlohmann::json c;
  std::ifstream(dir / "case.json") >> c;
  const ModelSpec spec = load_model_spec((dir / "model.json").string());
  const DType dtype = spec.dtype;
  const TensorMap batch = load_safetensors((dir / "batch.safetensors").string());
  const TensorMap state = load_safetensors((dir / "state.safetensors").string());
  const TensorMap expected = load_safetensors((dir / "expected.safetensors").string());
  const TensorMap flat = load_safetensors((dir / "flat.safetensors").string());
  const auto meta = metadata_of(dir / "expected.safetensors");
  const auto flat_meta = metadata_of(dir / "flat.safetensors");
  // ZeRO-2/3 write the common part and the flat slices instead of ZeRO-1's per-parameter state.
  TensorMap fsdp_expected;
  for (const auto& [name, t] : expected.items())
    if (!is_optim_state(name)) fsdp_expected.set(name, t);
  for (const auto& [name, t] : flat.items()) fsdp_expected.set(name, t);

  for (int zero : {1, 2, 3}) {
    const std::string what = GetParam() + " ZeRO-" + std::to_string(zero);
    DdpTrainer trainer(DeviceSet::create(c.at("devices").get<std::string>()), Model(spec), state, options_of(c, zero));
    for (int s = 0; s < c.at("steps").get<int>(); ++s) {
      DdpIteration it(trainer, batch.at("input"), batch.at("target"));
      it.run_to_end();
      EXPECT_EQ(it.shards(), c.at("shards").get<std::vector<std::vector<int64_t>>>()) << what;
    }
    const DdpStepOutput got = ddp_step_output(trainer.results(), dtype);
    EXPECT_EQ(got.metadata.at("zero.stage"), std::to_string(zero)) << what;
    if (zero == 1) {
      expect_tensors(got.tensors, expected, dtype, what);
      EXPECT_EQ(nlohmann::json::parse(got.metadata.at("zero.partition")),
                nlohmann::json::parse(meta.at("zero.partition")))
          << what << ": PyTorch's own partition";
      continue;
    }
    expect_tensors(got.tensors, fsdp_expected, dtype, what);
    EXPECT_EQ(nlohmann::json::parse(got.metadata.at("fsdp.flat")),
              nlohmann::json::parse(flat_meta.at("fsdp.flat")))
        << what;
    EXPECT_EQ(got.metadata.at("fsdp.padded_numel"), flat_meta.at("fsdp.padded_numel")) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ZeroPyTorchFixture, ::testing::ValuesIn(zero_cases()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(ZeroPyTorchFixtures, AllCasesArePresent) {
  const auto cases = zero_cases();
  for (const char* name : {"uneven_momentum_cpu2", "uneven_adam_cpu2", "uneven_adam_float64_cpu3",
                           "uneven_adamw_float64_cpu2", "simple_momentum_float64_cpu3"})
    EXPECT_NE(std::find(cases.begin(), cases.end(), name), cases.end()) << name;
}

}  // namespace
}  // namespace dpv
