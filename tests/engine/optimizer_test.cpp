// engine/optim: torch.optim.SGD, Adam and AdamW as every strategy steps them. The state is named
// as PyTorch names it and created at the first step; a saved and restored state continues exactly
// as an uninterrupted one; the constructor checks give PyTorch's messages; DataParallel and DDP
// step the same Adam (the PyTorch comparisons themselves are in tests/fixtures).
#include <gtest/gtest.h>

#include "dp_test_support.h"
#include "engine/backend.h"
#include "engine/ddp/ddp.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/optim/optimizer.h"

using namespace dpv;
using namespace dpv::testing;

namespace {

std::shared_ptr<DeviceSet> one_cpu() { return DeviceSet::create("cpu:1"); }

Tensor ramp(int64_t n, double start, double step) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + step * static_cast<double>(i);
  return Tensor::from_doubles({n}, DType::Float64, v);
}

std::string error_of(const OptimizerSettings& s) {
  try {
    check_optimizer_settings(s);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), "ValueError");
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Optimizer, StateNamesArePyTorchsAndCreatedAtTheFirstStep) {
  auto devices = one_cpu();
  Backend& be = (*devices)[0].backend();
  for (OptimizerKind kind : {OptimizerKind::Sgd, OptimizerKind::Adam, OptimizerKind::AdamW}) {
    ParameterOptimizer opt({.kind = kind, .lr = 0.1, .momentum = kind == OptimizerKind::Sgd ? 0.9 : 0.0});
    Tensor p = ramp(5, -1, 0.5), g = ramp(5, 0.3, -0.1);
    EXPECT_TRUE(opt.state_of("w").empty()) << optimizer_name(kind) << ": no state before the first step";
    opt.step("w", p, g, be, devices->shared(0));
    opt.step("w", p, g, be, devices->shared(0));
    std::vector<std::string> names;
    for (const auto& [name, t] : opt.state_of("w")) names.push_back(name);
    const std::vector<std::string> want = kind == OptimizerKind::Sgd ? std::vector<std::string>{"momentum_buffer"}
                                                                     : std::vector<std::string>{"step", "exp_avg", "exp_avg_sq"};
    EXPECT_EQ(names, want) << optimizer_name(kind);
    EXPECT_EQ(opt.steps().at("w"), 2);
    if (kind != OptimizerKind::Sgd) {
      const Tensor step = opt.state_of("w").front().second;
      EXPECT_EQ(step.dtype(), DType::Float32);
      EXPECT_EQ(step.numel(), 1);
      EXPECT_EQ(step.to_doubles().at(0), 2.0) << "step counts per parameter, as a float tensor";
    }
    EXPECT_EQ(opt.state_bytes(), static_cast<int64_t>(want.size() - (kind == OptimizerKind::Sgd ? 0 : 1)) * 5 * 8);
  }
}

TEST(Optimizer, SgdWithoutMomentumKeepsNoState) {
  auto devices = one_cpu();
  ParameterOptimizer opt({.lr = 0.5});
  Tensor p = ramp(3, 1, 1), g = ramp(3, 1, 0);
  opt.step("w", p, g, (*devices)[0].backend(), devices->shared(0));
  EXPECT_EQ(p.to_doubles(), (std::vector<double>{0.5, 1.5, 2.5}));
  EXPECT_EQ(opt.state_bytes(), 0);
}

TEST(Optimizer, AdamFirstStepMovesEachWeightByLrTimesTheGradientsSign) {
  // At step 1 the bias corrections cancel: m/(1-b1) = g, sqrt(v/(1-b2)) = |g|, so p -= lr * g / (|g| + eps).
  auto devices = one_cpu();
  ParameterOptimizer opt({.kind = OptimizerKind::Adam, .lr = 0.01, .eps = 0.0});
  Tensor p = ramp(4, 0, 1), g = Tensor::from_doubles({4}, DType::Float64, {2.0, -3.0, 0.5, -1e-3});
  opt.step("w", p, g, (*devices)[0].backend(), devices->shared(0));
  const std::vector<double> got = p.to_doubles();
  const double want[] = {-0.01, 1.01, 1.99, 3.01};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[static_cast<size_t>(i)], want[i], 1e-12) << i;
}

TEST(Optimizer, AdamWDecaysTheWeightsAndAdamDecaysTheGradient) {
  auto devices = one_cpu();
  Backend& be = (*devices)[0].backend();
  // A zero gradient: Adam's L2 term alone makes a gradient (wd * p), so the step is lr * sign(p);
  // AdamW's decay scales p by 1 - lr * wd and its Adam step has nothing to move.
  Tensor pa = ramp(3, 1, 1), pw = ramp(3, 1, 1), zero = Tensor::zeros({3}, DType::Float64);
  ParameterOptimizer adam({.kind = OptimizerKind::Adam, .lr = 0.1, .weight_decay = 0.5, .eps = 0.0});
  ParameterOptimizer adamw({.kind = OptimizerKind::AdamW, .lr = 0.1, .weight_decay = 0.5, .eps = 1e-8});
  adam.step("w", pa, zero, be, devices->shared(0));
  adamw.step("w", pw, zero, be, devices->shared(0));
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(pa.to_doubles()[static_cast<size_t>(i)], (1.0 + i) - 0.1, 1e-12);
    EXPECT_NEAR(pw.to_doubles()[static_cast<size_t>(i)], (1.0 + i) * (1 - 0.1 * 0.5), 1e-12);
  }
}

TEST(Optimizer, RestoredStateContinuesBitForBit) {
  auto devices = one_cpu();
  Backend& be = (*devices)[0].backend();
  const OptimizerSettings s{.kind = OptimizerKind::AdamW, .lr = 0.02, .weight_decay = 0.01, .beta1 = 0.8};
  ParameterOptimizer straight(s);
  Tensor p = ramp(6, -0.4, 0.3);
  for (int k = 0; k < 3; ++k) straight.step("w", p, ramp(6, 0.1 * k, 0.07), be, devices->shared(0));
  // Save after two steps, restore into a fresh optimizer, take the third step there.
  ParameterOptimizer first(s), resumed(s);
  Tensor q = ramp(6, -0.4, 0.3);
  for (int k = 0; k < 2; ++k) first.step("w", q, ramp(6, 0.1 * k, 0.07), be, devices->shared(0));
  for (const auto& [name, t] : first.state_of("w")) resumed.set_state("w", name, t.clone());
  resumed.step("w", q, ramp(6, 0.2, 0.07), be, devices->shared(0));
  EXPECT_EQ(q.to_doubles(), p.to_doubles());
  EXPECT_EQ(resumed.state("exp_avg_sq").at("w").to_doubles(), straight.state("exp_avg_sq").at("w").to_doubles());
  EXPECT_THROW(resumed.set_state("w", "momentum_buffer", q), Error) << "AdamW keeps no momentum buffer";
}

TEST(Optimizer, ConstructorChecksGivePyTorchsMessages) {
  EXPECT_EQ(error_of({.lr = -1}), "Invalid learning rate: -1.000000");
  EXPECT_EQ(error_of({.momentum = -0.5}), "Invalid momentum value: -0.5");
  EXPECT_EQ(error_of({.kind = OptimizerKind::Adam, .beta1 = 1.0}), "Invalid beta parameter at index 0: 1.0");
  EXPECT_EQ(error_of({.kind = OptimizerKind::AdamW, .beta2 = -0.1}), "Invalid beta parameter at index 1: -0.1");
  EXPECT_EQ(error_of({.kind = OptimizerKind::Adam, .eps = -1e-8}), "Invalid epsilon value: -1e-08");
  EXPECT_EQ(error_of({.kind = OptimizerKind::Adam, .weight_decay = -2}), "Invalid weight_decay value: -2.0");
  EXPECT_EQ(error_of({.kind = OptimizerKind::Sgd, .beta1 = 2.0}), "") << "SGD has no betas to check";
  EXPECT_EQ(parse_optimizer_kind("adamw"), OptimizerKind::AdamW);
  EXPECT_THROW(parse_optimizer_kind("lamb"), Error);
}

TEST(Optimizer, DdpWithAdamEqualsOneDeviceOnTheWholeBatch) {
  // No BatchNorm and a batch the ranks split evenly: DDP's averaged gradient is the whole batch's,
  // so every rank's own Adam makes the single device's steps.
  ModelSpec spec;
  spec.layers = {linear(4, 6), relu(), linear(6, 3)};
  spec.dtype = DType::Float64;
  const TensorMap state = Model(spec).initial_state(8);
  const Batch batch = random_batch(12, 4, 3, 21);
  const OptimizerSettings adam{.kind = OptimizerKind::Adam, .lr = 0.01, .weight_decay = 1e-3, .beta1 = 0.85};
  Trainer one(one_cpu(), Model(spec), state, TrainOptions{.optimizer = adam});
  DdpOptions o;
  o.optimizer = adam;
  DdpTrainer ddp(DeviceSet::create("cpu:3"), Model(spec), state, o);
  for (int s = 0; s < 3; ++s) {
    Iteration(one, batch.input, batch.target).run_to_end();
    DdpIteration(ddp, batch.input, batch.target).run_to_end();
  }
  const TensorMap want = one.state_to_host();
  for (const auto& r : ddp.results())
    for (const auto& [name, w] : want.items())
      EXPECT_LT(max_abs_diff(r.state.at(name).to_doubles(), w.to_doubles()), 1e-12) << "rank " << r.rank << " " << name;
  EXPECT_EQ(ddp.rank(0).optimizer().steps().at("0.weight"), 3);
}
