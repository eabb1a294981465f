// course/zero_memory.h: DDP and ZeRO-1/2/3 measured on Linear(4,6)-ReLU-Linear(6,3) float32 over
// two ranks with Adam, against bytes counted by hand from the shapes; the formula; the difference
// lines adding up; "what fits" growing with the model and shrinking with the GPUs.
#include <gtest/gtest.h>

#include <cmath>

#include "course/zero_memory.h"
#include "engine/error.h"

namespace dpv::course {
namespace {

// Linear(4,6)-ReLU-Linear(6,3): 0.weight [6,4] 24, 0.bias [6] 6, 2.weight [3,6] 18, 2.bias [3] 3.
constexpr int64_t kPsi = 24 + 6 + 18 + 3;  // 51
constexpr int64_t kF32 = 4;                // bytes per float32 element
constexpr int kWorld = 2;
// FSDP's flat parameter: 51 padded to a multiple of 2 = 52, each rank's slice 26 elements.
constexpr int64_t kPadded = 52, kSlice = kPadded / kWorld;
// ZeroRedundancyOptimizer's greedy partition, largest first to the rank with the fewest elements:
// 0.weight (24) -> rank 0; 2.weight (18) -> rank 1 (0 < 24); 0.bias (6) -> rank 1 (18 < 24);
// 2.bias (3) -> rank 0 (24 = 24, the lower rank). Rank 0: 24 + 3 = 27, rank 1: 18 + 6 = 24.
constexpr int64_t kZero1Owned[kWorld] = {27, 24};
constexpr int64_t kAdamStates = 2;  // exp_avg, exp_avg_sq on the device (`step` on the host)

ModelSpec small_mlp() {
  ModelSpec m;
  LayerSpec l1;
  l1.kind = LayerKind::Linear;
  l1.in_features = 4;
  l1.out_features = 6;
  LayerSpec relu;
  relu.kind = LayerKind::ReLU;
  LayerSpec l2 = l1;
  l2.in_features = 6;
  l2.out_features = 3;
  m.layers = {l1, relu, l2};
  return m;
}

RunSpec small_run(OptimizerKind optimizer = OptimizerKind::Adam) {
  RunSpec run;
  run.model = small_mlp();
  run.devices = "cpu:" + std::to_string(kWorld);
  run.batch = 8;
  run.optimizer.kind = optimizer;
  run.optimizer.lr = 1e-3;
  run.seed = 3;
  return run;
}

const MemoryComparison& measured() {
  static const MemoryComparison c = compare_memory(small_run());
  return c;
}

int64_t model_state(const MemoryBreakdown& m) { return model_state_bytes(m); }

TEST(ZeroMemory, MeasuresTheFourStrategiesInOrder) {
  const MemoryComparison& c = measured();
  ASSERT_EQ(c.strategies.size(), 4u);
  EXPECT_EQ(c.strategies[0].strategy, StrategyKind::DistributedDataParallel);
  EXPECT_EQ(c.strategies[1].strategy, StrategyKind::Zero1);
  EXPECT_EQ(c.strategies[2].strategy, StrategyKind::Zero2);
  EXPECT_EQ(c.strategies[3].strategy, StrategyKind::Zero3);
  EXPECT_EQ(c.parameters, kPsi);
  EXPECT_EQ(c.world, kWorld);
  EXPECT_EQ(c.flat.padded_numel, kPadded);
  for (const StrategyMemory& s : c.strategies) {
    ASSERT_FALSE(s.samples.empty());
    EXPECT_EQ(s.persistent.size(), static_cast<size_t>(kWorld));
    // ZeRO-1's iteration ends with the broadcast of the stepped parameters, the others' with the step.
    EXPECT_EQ(s.samples.back().stage.kind,
              s.strategy == StrategyKind::Zero1 ? StageKind::BroadcastParams : StageKind::Step)
        << strategy_short_name(s.strategy);
    for (const MemorySample& sample : s.samples) EXPECT_EQ(sample.ranks.size(), static_cast<size_t>(kWorld));
  }
  // ZeRO-1 broadcasts after its step; ZeRO-2/3 gather and reduce-scatter; ZeRO-3 also frees.
  auto has = [](const StrategyMemory& s, StageKind k) {
    for (const MemorySample& sample : s.samples)
      if (sample.stage.kind == k) return true;
    return false;
  };
  EXPECT_TRUE(has(c.of(StrategyKind::Zero1), StageKind::BroadcastParams));
  EXPECT_TRUE(has(c.of(StrategyKind::Zero2), StageKind::ReduceScatter));
  EXPECT_FALSE(has(c.of(StrategyKind::Zero2), StageKind::FreeParams));
  EXPECT_TRUE(has(c.of(StrategyKind::Zero3), StageKind::FreeParams));
}

TEST(ZeroMemory, PersistentBytesMatchTheHandCount) {
  const MemoryComparison& c = measured();
  for (int r = 0; r < kWorld; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const MemoryBreakdown& ddp = c.of(StrategyKind::DistributedDataParallel).persistent[r];
    EXPECT_EQ(ddp.parameters, kPsi * kF32);
    EXPECT_EQ(ddp.gradients, kPsi * kF32);
    EXPECT_EQ(ddp.optimizer, kAdamStates * kPsi * kF32);
    EXPECT_EQ(ddp.buckets, kPsi * kF32);
    EXPECT_EQ(ddp.gathered, 0);

    const MemoryBreakdown& z1 = c.of(StrategyKind::Zero1).persistent[r];
    EXPECT_EQ(z1.parameters, kPsi * kF32);
    EXPECT_EQ(z1.gradients, kPsi * kF32);
    EXPECT_EQ(z1.optimizer, kAdamStates * kZero1Owned[r] * kF32);
    EXPECT_EQ(z1.buckets, kPsi * kF32);

    for (StrategyKind kind : {StrategyKind::Zero2, StrategyKind::Zero3}) {
      SCOPED_TRACE(strategy_short_name(kind));
      const MemoryBreakdown& z = c.of(kind).persistent[r];
      EXPECT_EQ(z.parameters, kSlice * kF32);
      EXPECT_EQ(z.gradients, kSlice * kF32);
      EXPECT_EQ(z.optimizer, kAdamStates * kSlice * kF32);
      EXPECT_EQ(z.buckets, 0);
      EXPECT_EQ(z.gathered, 0);
    }
  }
}

// After the first Backward stage FSDP holds the gathered flat parameter and its own full flat
// gradient beside the slices; ZeRO-3 has no gathered parameter between its FreeParams and the
// second GatherParams, ZeRO-2 keeps it from the forward to the reduce-scatter.
TEST(ZeroMemory, FsdpHoldsTheFullParameterOnlyWhileItNeedsIt) {
  const MemoryComparison& c = measured();
  for (StrategyKind kind : {StrategyKind::Zero2, StrategyKind::Zero3}) {
    SCOPED_TRACE(strategy_short_name(kind));
    const StrategyMemory& s = c.of(kind);
    bool seen_backward = false;
    for (const MemorySample& sample : s.samples) {
      if (sample.stage.kind != StageKind::Backward || seen_backward) continue;
      seen_backward = true;
      EXPECT_EQ(sample.ranks[0].gathered, kPadded * kF32);
      EXPECT_EQ(sample.ranks[0].gradients, (kPadded + kSlice) * kF32);
    }
    EXPECT_TRUE(seen_backward);
    EXPECT_EQ(s.at_peak[0].gathered, kPadded * kF32);
    for (const MemorySample& sample : s.samples) {
      if (sample.stage.kind == StageKind::Loss) {
        EXPECT_EQ(sample.ranks[0].gathered, kind == StrategyKind::Zero2 ? kPadded * kF32 : 0);
      }
    }
  }
}

TEST(ZeroMemory, ModelStateShrinksFromDdpToZero3WithAdam) {
  const MemoryComparison& c = measured();
  auto persistent = [&](StrategyKind k) { return model_state(c.of(k).persistent[0]); };
  EXPECT_EQ(persistent(StrategyKind::DistributedDataParallel), (1 + 1 + 2 + 1) * kPsi * kF32);
  EXPECT_GT(persistent(StrategyKind::DistributedDataParallel), persistent(StrategyKind::Zero1));
  EXPECT_GT(persistent(StrategyKind::Zero1), persistent(StrategyKind::Zero2));
  // Between iterations both FSDP stages keep only slices: they tie. The difference is while the
  // loss is computed, between the forward and the backward: ZeRO-3 has freed the full parameter.
  EXPECT_EQ(persistent(StrategyKind::Zero2), persistent(StrategyKind::Zero3));
  auto at_loss = [&](StrategyKind k) {
    for (const MemorySample& sample : c.of(k).samples)
      if (sample.stage.kind == StageKind::Loss) return model_state(sample.ranks[0]);
    return int64_t{-1};
  };
  EXPECT_GT(at_loss(StrategyKind::Zero2), at_loss(StrategyKind::Zero3));
  EXPECT_GT(at_loss(StrategyKind::Zero1), at_loss(StrategyKind::Zero2));
}

TEST(ZeroMemory, FormulaPerStrategy) {
  OptimizerSettings adam;
  adam.kind = OptimizerKind::Adam;
  const MemoryFormula f = memory_formula(kPsi, kWorld, DType::Float32, adam);
  EXPECT_DOUBLE_EQ(f.optimizer_bytes, 8);
  EXPECT_DOUBLE_EQ(f.ddp, (4 + 4 + 8) * 51.0);
  EXPECT_DOUBLE_EQ(f.zero1, (4 + 4 + 8 / 2.0) * 51.0);
  EXPECT_DOUBLE_EQ(f.zero2, (4 + (4 + 8) / 2.0) * 51.0);
  EXPECT_DOUBLE_EQ(f.zero3, (4 + 4 + 8) * 51.0 / 2);
  EXPECT_DOUBLE_EQ(f.mixed_ddp, (2 + 2 + 12) * 51.0);
  EXPECT_DOUBLE_EQ(f.mixed_zero1, (2 + 2 + 12 / 2.0) * 51.0);
  EXPECT_DOUBLE_EQ(f.mixed_zero2, (2 + (2 + 12) / 2.0) * 51.0);
  EXPECT_DOUBLE_EQ(f.mixed_zero3, (2 + 2 + 12) * 51.0 / 2);
  EXPECT_DOUBLE_EQ(f.for_strategy(StrategyKind::Zero2), f.zero2);
  EXPECT_DOUBLE_EQ(f.parts(StrategyKind::Zero1).optimizer, 8 * 51.0 / 2);

  OptimizerSettings sgd;
  EXPECT_DOUBLE_EQ(memory_formula(10, 4, DType::Float32, sgd).ddp, 80);
  sgd.momentum = 0.9;
  EXPECT_DOUBLE_EQ(memory_formula(10, 4, DType::Float32, sgd).zero1, 80 + 10);
  EXPECT_DOUBLE_EQ(memory_formula(10, 1, DType::Float64, sgd).ddp, 240);
  EXPECT_THROW(memory_formula(10, 0, DType::Float32, sgd), Error);
}

// Every difference between rank 0's measured bytes and the formula has a line, between iterations
// and at the peak, and the lines add up to measured minus formula (whole bytes against a formula
// that may be fractional: each of its three parts is rounded once).
void expect_explained(const MemoryComparison& c) {
  for (const StrategyMemory& s : c.strategies)
    for (bool at_peak : {false, true}) {
      SCOPED_TRACE(std::string(strategy_short_name(s.strategy)) + (at_peak ? " at its peak" : " between iterations"));
      const MemoryBreakdown& m = at_peak ? s.at_peak[0] : s.persistent[0];
      int64_t sum = 0;
      for (const MemoryDifference& d : c.differences)
        if (d.strategy == s.strategy && d.at_peak == at_peak) {
          sum += d.bytes;
          EXPECT_TRUE(d.explained) << d.why;
          EXPECT_FALSE(d.why.empty());
        }
      EXPECT_NEAR(static_cast<double>(sum), static_cast<double>(m.total()) - c.formula.for_strategy(s.strategy), 1.5);
    }
  // After every stage too (the backward part way, the gathered parameter, the full gradient).
  for (const StrategyMemory& s : c.strategies)
    for (int i = 0; i < static_cast<int>(s.samples.size()); ++i) {
      SCOPED_TRACE(std::string(strategy_short_name(s.strategy)) + " after " + s.samples[i].stage.title);
      int64_t sum = 0;
      for (const MemoryDifference& d : explain_stage(c, s.strategy, i)) {
        sum += d.bytes;
        // A bucket all-reduce may still be running when a backward stage ends: its scratch, if the
        // thread timing catches it, is `other`, and only that may stay unexplained.
        EXPECT_TRUE(d.explained || d.other) << d.why;
      }
      EXPECT_NEAR(static_cast<double>(sum),
                  static_cast<double>(s.samples[i].ranks[0].total()) - c.formula.for_strategy(s.strategy), 1.5);
    }
}

TEST(ZeroMemory, DifferencesExplainEveryByteOfRankZero) {
  const MemoryComparison& c = measured();
  expect_explained(c);
  // DDP's buckets: one line, the gradient bytes again.
  bool buckets = false;
  for (const MemoryDifference& d : c.differences)
    if (d.strategy == StrategyKind::DistributedDataParallel && !d.at_peak && d.kind == MemoryKind::Buckets) {
      buckets = true;
      EXPECT_EQ(d.bytes, kPsi * kF32);
    }
  EXPECT_TRUE(buckets);
  // ZeRO-1's rank 0 steps 27 elements, not 25.5: 1.5 elements x 8 bytes of Adam state more.
  bool partition = false;
  for (const MemoryDifference& d : c.differences)
    if (d.strategy == StrategyKind::Zero1 && !d.at_peak && d.kind == MemoryKind::Optimizer && d.bytes != 0) {
      partition = true;
      EXPECT_EQ(d.bytes, 12);
      EXPECT_NE(d.why.find("0.weight, 2.bias"), std::string::npos) << d.why;
    }
  EXPECT_TRUE(partition);
  EXPECT_THROW(explain_stage(c, StrategyKind::Zero3, 1000), Error);
  EXPECT_THROW(explain_stage(c, StrategyKind::DataParallel, 0), Error);
}

// Part way through DDP's backward only the layers behind it have their new .grad: a line says so.
TEST(ZeroMemory, DdpGradientsPartWayThroughTheBackward) {
  const MemoryComparison& c = measured();
  const StrategyMemory& ddp = c.of(StrategyKind::DistributedDataParallel);
  bool seen = false;
  for (int i = 0; i < static_cast<int>(ddp.samples.size()) && !seen; ++i) {
    if (ddp.samples[i].stage.kind != StageKind::Backward) continue;
    seen = true;  // the first Backward stage: layer 2, Linear(6,3), 18 + 3 gradients
    EXPECT_EQ(ddp.samples[i].ranks[0].gradients, (18 + 3) * kF32);
    int64_t lines = 0;
    for (const MemoryDifference& d : explain_stage(c, StrategyKind::DistributedDataParallel, i))
      if (d.kind == MemoryKind::Gradients) lines += d.bytes;
    EXPECT_EQ(lines, (18 + 3 - kPsi) * kF32);
  }
  EXPECT_TRUE(seen);
}

// A model with buffers (BatchNorm) on three ranks, so the flat parameter is padded, and SGD with
// momentum: the buffer and padding lines carry the differences.
TEST(ZeroMemory, BuffersAndPaddingAreExplained) {
  RunSpec run;
  run.preset = "mlp-bn";
  run.devices = "cpu:3";
  run.batch = 12;
  run.optimizer.momentum = 0.9;
  const MemoryComparison c = compare_memory(run);
  EXPECT_GT(c.buffer_bytes, 0);
  EXPECT_GT(c.flat.padding(), 0);
  expect_explained(c);
}

TEST(ZeroMemory, WhatFitsGrowsWithTheModelAndShrinksWithTheGpus) {
  const MemoryComparison& c = measured();
  const double gpu = 80e9;
  for (int64_t params : {int64_t{1'000'000'000}, int64_t{7'000'000'000}}) {
    const auto one = what_fits(c, params, 1, gpu), eight = what_fits(c, params, 8, gpu);
    const auto bigger = what_fits(c, params * 2, 8, gpu);
    ASSERT_EQ(one.size(), 4u);
    for (size_t i = 0; i < one.size(); ++i) {
      SCOPED_TRACE(strategy_short_name(one[i].strategy));
      EXPECT_TRUE(one[i].is_formula);
      EXPECT_GE(one[i].bytes_per_gpu, eight[i].bytes_per_gpu);
      EXPECT_GT(bigger[i].bytes_per_gpu, eight[i].bytes_per_gpu);
      EXPECT_EQ(eight[i].fits, eight[i].bytes_per_gpu <= gpu);
    }
    // DDP keeps everything on every GPU; ZeRO-1 shards the optimizer state; ZeRO-3 all model state.
    EXPECT_DOUBLE_EQ(one[0].bytes_per_gpu, eight[0].bytes_per_gpu);
    EXPECT_GT(one[1].bytes_per_gpu, eight[1].bytes_per_gpu);
    EXPECT_GT(eight[0].bytes_per_gpu, eight[1].bytes_per_gpu);
    // DDP: 20 bytes per parameter (4 parameter, 4 gradient, 8 Adam, 4 buckets), measured.
    const double p = static_cast<double>(params);
    EXPECT_NEAR(eight[0].bytes_per_gpu, 20.0 * p, 1e-6 * p);
    // ZeRO-1: 12 whole (parameter, gradient, buckets) and Adam's 8 spread over the GPUs, whatever
    // share the greedy partition gave rank 0 of the small model (27 of 51 elements).
    EXPECT_NEAR(eight[1].bytes_per_gpu, (12.0 + 8.0 / 8) * p, 1e-6 * p);
    // ZeRO-3: the slices (4 + 4 + 8, padded 52/51) spread over the GPUs, plus the gathered flat
    // parameter and the backward's full flat gradient (4 + 4 bytes, padded) that rank 0 holds at once.
    EXPECT_NEAR(eight[3].bytes_per_gpu, (16.0 / 8 + 8.0) * 52 / 51 * p, 1e-6 * p);
    // Between iterations ZeRO-3 keeps only the slices; the gathered part is the peak's alone.
    EXPECT_NEAR(eight[3].persistent_bytes_per_gpu, 16.0 / 8 * 52 / 51 * p, 1e-6 * p);
    EXPECT_NEAR(eight[3].transient_bytes_per_gpu, 8.0 * 52 / 51 * p, 1e-6 * p);
    EXPECT_DOUBLE_EQ(eight[0].transient_bytes_per_gpu, 0.0);
    for (const FitEstimate& e : eight)
      EXPECT_DOUBLE_EQ(e.bytes_per_gpu, e.persistent_bytes_per_gpu + e.transient_bytes_per_gpu);
  }
  EXPECT_THROW(what_fits(c, 0, 8, gpu), Error);
  EXPECT_THROW(what_fits(c, 10, 0, gpu), Error);
  EXPECT_THROW(what_fits(MemoryComparison{}, 10, 1, gpu), Error);
}

TEST(ZeroMemory, BadRunIsAnError) {
  RunSpec run = small_run();
  run.devices = "cpu:0";
  EXPECT_THROW(compare_memory(run), Error);
  run = small_run();
  run.preset = "no-such-model";
  run.model.reset();
  EXPECT_THROW(compare_memory(run), Error);
}

}  // namespace
}  // namespace dpv::course
