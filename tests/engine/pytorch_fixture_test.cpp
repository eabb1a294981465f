// The engine against PyTorch: every folder under tests/fixtures with a case.json was produced by
// tests/fixtures/make_fixtures.py (PyTorch 1.13 on the CPU, emulating nn.DataParallel on k
// devices). Here the engine runs the same iterations and every tensor of expected.safetensors
// must match: the gathered output and loss, the reduced gradients, the state dict after the
// steps (running statistics and num_batches_tracked included), and the per-device (and, with
// sync-bn, global) BatchNorm statistics.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/data_parallel.h"
#include "engine/device.h"
#include "engine/io/safetensors.h"
#include "engine/model.h"
#include "engine/model_spec.h"

namespace dpv {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> fixture_cases() {
  std::vector<std::string> names;
  if (!fs::exists(DPV_TEST_DATA_DIR)) return names;
  for (const auto& entry : fs::directory_iterator(DPV_TEST_DATA_DIR))
    if (fs::exists(entry.path() / "case.json")) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

struct Tolerance {
  double rtol, atol;
};

Tolerance tolerance_for(DType model_dtype) {
  return model_dtype == DType::Float64 ? Tolerance{1e-10, 1e-10} : Tolerance{1e-4, 1e-5};
}

// What the engine produced, under the names expected.safetensors uses (as `dpv step` writes them).
TensorMap run_case(const fs::path& dir, const nlohmann::json& c) {
  Model model(load_model_spec((dir / "model.json").string()));
  const DType dtype = model.dtype();
  TensorMap batch = load_safetensors((dir / "batch.safetensors").string());
  TensorMap state = load_safetensors((dir / "state.safetensors").string());
  TrainOptions options{.optimizer = {.kind = parse_optimizer_kind(c.value("optimizer", "sgd")),
                                     .lr = c.at("lr").get<double>(),
                                     .momentum = c.at("momentum").get<double>(),
                                     .weight_decay = c.at("weight_decay").get<double>()},
                       .sync_bn = c.at("sync_bn").get<bool>()};
  if (c.contains("betas")) {  // Adam and AdamW
    options.optimizer.beta1 = c.at("betas").at(0).get<double>();
    options.optimizer.beta2 = c.at("betas").at(1).get<double>();
    options.optimizer.eps = c.at("eps").get<double>();
  }
  Trainer trainer(DeviceSet::create(c.at("devices").get<std::string>()), std::move(model), state, options);
  std::unique_ptr<Iteration> it;
  for (int s = 0; s < c.at("steps").get<int>(); ++s) {
    it = std::make_unique<Iteration>(trainer, batch.at("input"), batch.at("target"));
    it->run_to_end();
  }
  EXPECT_EQ(it->chunks(), c.at("chunks").get<std::vector<int64_t>>());

  TensorMap got;
  got.set("output", it->output().to(nullptr));
  got.set("loss", Tensor::from_doubles({}, dtype, {it->loss()}));
  for (const auto& [name, g] : trainer.grads().items()) got.set("grad/" + name, g.to(nullptr));
  const TensorMap final_state = trainer.state_to_host();
  for (const auto& [name, t] : final_state.items()) got.set("state/" + name, t);
  for (const BatchNormStats& s : it->batchnorm_stats()) {
    const std::string where = s.device < 0 ? "global" : "dev" + std::to_string(s.device);
    const std::string key = "stats/" + std::to_string(s.layer) + "/" + where + "/";
    const Shape shape{static_cast<int64_t>(s.mean.size())};
    got.set(key + "mean", Tensor::from_doubles(shape, DType::Float64, s.mean));
    got.set(key + "var", Tensor::from_doubles(shape, DType::Float64, s.var));
  }
  return got;
}

class PyTorchFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(PyTorchFixture, EngineMatchesPyTorch) {
  const fs::path dir = fs::path(DPV_TEST_DATA_DIR) / GetParam();
  nlohmann::json c;
  std::ifstream(dir / "case.json") >> c;
  TensorMap want = load_safetensors((dir / "expected.safetensors").string());
  TensorMap got = run_case(dir, c);
  const Tolerance tol = tolerance_for(parse_dtype(c.at("dtype").get<std::string>()));

  // The same set of names: nothing missing, nothing extra.
  std::vector<std::string> want_names = want.names(), got_names = got.names();
  std::sort(want_names.begin(), want_names.end());
  std::sort(got_names.begin(), got_names.end());
  EXPECT_EQ(got_names, want_names);

  for (const auto& [name, w] : want.items()) {
    const Tensor* g = got.find(name);
    if (!g) continue;  // reported above
    ASSERT_EQ(g->shape(), w.shape()) << name;
    if (w.dtype() == DType::Int64) {
      EXPECT_EQ(g->to_int64(), w.to_int64()) << name;
      continue;
    }
    const std::vector<double> gv = g->to_doubles(), wv = w.to_doubles();
    double worst = 0;
    size_t worst_at = 0;
    int bad = 0;
    for (size_t i = 0; i < wv.size(); ++i) {
      const double err = std::abs(gv[i] - wv[i]);
      if (err > tol.atol + tol.rtol * std::abs(wv[i])) {
        ++bad;
        if (err > worst) worst = err, worst_at = i;
      }
    }
    EXPECT_EQ(bad, 0) << GetParam() << ": " << name << " has " << bad << " of " << wv.size()
                      << " values out of tolerance; worst at [" << worst_at << "]: engine " << gv[worst_at]
                      << ", PyTorch " << wv[worst_at];
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PyTorchFixture, ::testing::ValuesIn(fixture_cases()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(PyTorchFixtures, AllCasesArePresent) {
  // make_fixtures.py writes these; a missing folder would silently shrink the suite above.
  const std::vector<std::string> cases = fixture_cases();
  for (const char* name : {"simple_cpu1", "simple_cpu2", "simple_cpu4", "mlp_bn_cpu4", "mlp_syncbn_cpu4",
                           "mlp_syncbn_uneven_cpu4", "cnn_bn_cpu2", "mlp_bn_momentum_wd_cpu2", "mlp_bn_float64_cpu3"})
    EXPECT_NE(std::find(cases.begin(), cases.end(), name), cases.end()) << name;
}

}  // namespace
}  // namespace dpv
