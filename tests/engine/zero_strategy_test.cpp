// The sharded strategies against plain DDP on the same state and batch (in-process ranks, several
// steps): ZeroRedundancyOptimizer and FSDP change where parameters, gradients and optimizer state
// live, never what the model computes. ZeRO-1 steps the same averaged gradients with the same
// optimizer, so it equals DDP bit for bit; FSDP averages by reduce-scatter with a pre- and a
// post-divide (another rounding), so ZeRO-2/3 equal DDP within a few ulps per step.
#include <gtest/gtest.h>

#include <set>

#include "engine/optim/optimizer.h"
#include "zero_test_support.h"

using namespace dpv;
using namespace dpv::testing;

namespace {

struct OptimizerCase {
  std::string name;
  OptimizerSettings settings;
};

std::vector<OptimizerCase> optimizer_cases() {
  OptimizerSettings sgd;
  sgd.lr = 0.1;
  OptimizerSettings momentum;
  momentum.lr = 0.05;
  momentum.momentum = 0.9;
  momentum.weight_decay = 1e-3;
  OptimizerSettings adam;
  adam.kind = OptimizerKind::Adam;
  adam.lr = 0.01;
  adam.weight_decay = 1e-3;
  OptimizerSettings adamw;
  adamw.kind = OptimizerKind::AdamW;
  adamw.lr = 0.01;
  adamw.weight_decay = 1e-2;
  adamw.beta1 = 0.8;
  return {{"sgd", sgd}, {"sgd_momentum_wd", momentum}, {"adam", adam}, {"adamw", adamw}};
}

// float64: rounding differences of ~1e-16 a step; float32: a few ulps (1.2e-7 each), grown a
// little by BatchNorm over 3 steps.
double rtol_of(DType dtype) { return dtype == DType::Float64 ? 1e-12 : 4e-6; }
double atol_of(DType dtype) { return dtype == DType::Float64 ? 1e-14 : 1e-7; }

// The state names the optimizer keeps per parameter, without `step`.
std::vector<std::string> tensor_state_names(const OptimizerSettings& settings) {
  std::vector<std::string> names;
  for (const std::string& n : optimizer_state_names(settings))
    if (n != "step") names.push_back(n);
  return names;
}

constexpr int kSteps = 3;

bool is_adam(const OptimizerSettings& o) { return o.kind != OptimizerKind::Sgd; }

struct Scenario {
  int zero;
  int world;
  DType dtype;
  OptimizerCase optimizer;
  ModelSpec spec() const { return uneven_mlp(dtype, !is_adam(optimizer.settings)); }
  std::string label() const {
    return "ZeRO-" + std::to_string(zero) + " W " + std::to_string(world) + " " + dtype_name(dtype) + " " +
           optimizer.name;
  }
};

// What every stage leaves the same as DDP: each rank's loss, output and buffers.
void expect_same_model_outputs(const ZeroRun& ddp, const ZeroRun& zero, const Scenario& s) {
  const double rtol = rtol_of(s.dtype), atol = atol_of(s.dtype);
  for (int r = 0; r < s.world; ++r) {
    const DdpRankResult &want = ddp.results[static_cast<size_t>(r)], &got = zero.results[static_cast<size_t>(r)];
    const std::string at = s.label() + " rank " + std::to_string(r);
    EXPECT_EQ(got.zero_stage, s.zero) << at;
    expect_near_all({got.loss}, {want.loss}, rtol, atol, at + " loss");
    expect_near_all(got.output.to_doubles(), want.output.to_doubles(), rtol, atol, at + " output");
    const Model model(s.spec());
    for (const auto& d : model.buffer_decls()) {
      ASSERT_TRUE(got.state.contains(d.name)) << at << " " << d.name;
      expect_near_all(got.state.at(d.name).to_doubles(), want.state.at(d.name).to_doubles(), rtol, atol,
                      at + " " + d.name);
    }
  }
}

void expect_zero1(const ZeroRun& ddp, const ZeroRun& zero, const Scenario& s) {
  const ModelSpec spec = s.spec();
  const Model model(spec);
  const ZeroPartition want_partition = zero1_partition(param_extents_of(spec), s.world);
  std::multiset<std::string> owned;
  for (int r = 0; r < s.world; ++r) {
    const DdpRankResult &want = ddp.results[static_cast<size_t>(r)], &got = zero.results[static_cast<size_t>(r)];
    const std::string at = s.label() + " rank " + std::to_string(r);
    EXPECT_EQ(got.partition, want_partition) << at;
    // The same averaged gradients (DDP's own buckets) and the same optimizer: the same bits.
    for (const auto& [name, t] : want.state.items())
      EXPECT_TRUE(same_values(got.state.at(name), t)) << at << " state " << name;
    for (const auto& [name, g] : want.grads.items())
      EXPECT_TRUE(same_values(got.grads.at(name), g)) << at << " grad " << name;
    // After the broadcast every rank holds rank 0's parameters exactly.
    for (const auto& d : model.parameter_decls())
      EXPECT_TRUE(same_values(got.state.at(d.name), zero.results[0].state.at(d.name))) << at << " " << d.name;
    // Optimizer state only for the parameters this rank owns, equal to DDP's for them.
    const auto& mine = want_partition[static_cast<size_t>(r)];
    owned.insert(mine.begin(), mine.end());
    std::set<std::string> want_names;
    for (const std::string& p : mine)
      for (const std::string& state_name : tensor_state_names(s.optimizer.settings)) {
        want_names.insert(p + "/" + state_name);
        const Tensor& reference = ddp.trainer->rank(r).optimizer().state(state_name).at(p);
        ASSERT_TRUE(got.optim.contains(p + "/" + state_name)) << at << " " << p << "/" << state_name;
        EXPECT_TRUE(same_values(got.optim.at(p + "/" + state_name), reference)) << at << " " << p << "/" << state_name;
      }
    const auto names = got.optim.names();
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), want_names) << at;
    EXPECT_FALSE(got.flat_param.defined()) << at;
  }
  std::multiset<std::string> all;
  for (const auto& d : model.parameter_decls()) all.insert(d.name);
  EXPECT_EQ(owned, all) << s.label() << ": every parameter owned by exactly one rank";
}

void expect_padding_zero(const std::vector<double>& slice, const FlatLayout& layout, int rank, const std::string& what) {
  for (int64_t i = layout.shard_real_numel(rank); i < layout.shard_numel(); ++i)
    EXPECT_EQ(slice[static_cast<size_t>(i)], 0.0) << what << " padding element " << i;
}

void expect_fsdp(const ZeroRun& ddp, const ZeroRun& zero, const Scenario& s) {
  const FlatLayout layout = make_flat_layout(param_extents_of(s.spec()), s.world);
  const double rtol = rtol_of(s.dtype), atol = atol_of(s.dtype);
  const DdpRankResult& ddp0 = ddp.results[0];
  TensorMap ddp_params;
  for (const FlatEntry& e : layout.entries) ddp_params.set(e.name, ddp0.state.at(e.name));
  const std::vector<double> want_param = flat_of(ddp_params, layout), want_grad = flat_of(ddp0.grads, layout);
  for (int r = 0; r < s.world; ++r) {
    const DdpRankResult& got = zero.results[static_cast<size_t>(r)];
    const std::string at = s.label() + " rank " + std::to_string(r);
    EXPECT_EQ(flat_layout_json(got.flat_layout), flat_layout_json(layout)) << at;
    EXPECT_EQ(got.flat_layout.padded_numel, layout.padded_numel) << at;
    EXPECT_TRUE(got.grads.empty()) << at << ": the full gradients are freed after the reduce-scatter";
    EXPECT_TRUE(got.optim.empty()) << at;
    ASSERT_TRUE(got.flat_param.defined() && got.flat_grad.defined()) << at;
    ASSERT_EQ(got.flat_param.shape(), Shape{layout.shard_numel()}) << at;
    ASSERT_EQ(got.flat_grad.shape(), Shape{layout.shard_numel()}) << at;
    const auto param = got.flat_param.to_doubles(), grad = got.flat_grad.to_doubles();
    expect_near_all(param, slice_of(want_param, layout, r), rtol, atol, at + " flat param");
    expect_near_all(grad, slice_of(want_grad, layout, r), rtol, atol, at + " flat grad");
    expect_padding_zero(param, layout, r, at + " flat param");
    expect_padding_zero(grad, layout, r, at + " flat grad");
    const auto state_names = tensor_state_names(s.optimizer.settings);
    EXPECT_EQ(got.flat_state.size(), state_names.size()) << at;
    for (const std::string& state_name : state_names) {
      ASSERT_TRUE(got.flat_state.contains(state_name)) << at << " " << state_name;
      const auto state = got.flat_state.at(state_name).to_doubles();
      const auto want = flat_of(ddp.trainer->rank(0).optimizer().state(state_name), layout);
      expect_near_all(state, slice_of(want, layout, r), rtol, atol, at + " flat " + state_name);
      expect_padding_zero(state, layout, r, at + " flat " + state_name);
    }
    // The parameters live only in the slices: the rank's state holds its buffers alone.
    for (const FlatEntry& e : layout.entries) EXPECT_FALSE(got.state.contains(e.name)) << at << " " << e.name;
  }
}

}  // namespace

TEST(ZeroStrategy, EveryStageEqualsDdpOnTheSameStateAndBatch) {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    const Batch batch = random_batch(11, 5, 3, 32, dtype);  // 11 rows: every W pads a shard
    for (int world : {2, 3, 4}) {
      for (const OptimizerCase& optimizer : optimizer_cases()) {
        const ModelSpec spec = Scenario{0, world, dtype, optimizer}.spec();
        const TensorMap state = Model(spec).initial_state(31);
        const ZeroRun ddp = run_zero(0, world, spec, state, batch, optimizer.settings, kSteps);
        for (int zero : {1, 2, 3}) {
          const Scenario s{zero, world, dtype, optimizer};
          SCOPED_TRACE(s.label());
          const ZeroRun got = run_zero(zero, world, spec, state, batch, optimizer.settings, kSteps);
          EXPECT_EQ(got.trainer->kind(), rank_strategy(zero));
          expect_same_model_outputs(ddp, got, s);
          if (zero == 1) expect_zero1(ddp, got, s);
          else expect_fsdp(ddp, got, s);
        }
      }
    }
  }
}

// The comparison above would pass if the run did nothing: the steps must move the parameters.
TEST(ZeroStrategy, TheComparedStepsChangeTheParameters) {
  const ModelSpec spec = uneven_mlp(DType::Float64);
  const TensorMap state = Model(spec).initial_state(31);
  const Batch batch = random_batch(11, 5, 3, 32);
  for (int zero : {1, 2, 3}) {
    const ZeroRun run = run_zero(zero, 3, spec, state, batch, optimizer_cases()[1].settings, 1);
    const DdpRankResult& r0 = run.results[0];
    // Rank 0's slice of 27 elements (81 / 3) lies inside 0.weight's 35.
    const std::vector<double> before = state.at("0.weight").to_doubles(27);
    const std::vector<double> after =
        zero == 1 ? r0.state.at("0.weight").to_doubles(27) : r0.flat_param.to_doubles();
    EXPECT_GT(max_abs_diff(before, after), 1e-4) << "ZeRO-" << zero;
  }
}

TEST(ZeroStrategy, Zero3KeepsOnlyTheShardAfterTheStepAndBetweenFreeAndGather) {
  const ModelSpec spec = uneven_mlp(DType::Float64);
  const TensorMap state = Model(spec).initial_state(33);
  const Batch batch = random_batch(9, 5, 3, 34);
  for (int zero : {2, 3}) {
    DdpTrainer trainer(DeviceSet::create("cpu:3"), Model(spec), state, zero_options(zero, {}));
    DdpIteration it(trainer, batch.input, batch.target);
    bool gathered = false;  // from a GatherParams to the next FreeParams or ReduceScatter
    int gathers = 0;
    while (!it.finished()) {
      const StageEvent e = it.step();
      if (e.stage.kind == StageKind::Construct || e.stage.kind == StageKind::Sample) continue;
      if (e.stage.kind == StageKind::GatherParams) gathered = true, ++gathers;
      if (e.stage.kind == StageKind::FreeParams || e.stage.kind == StageKind::ReduceScatter) gathered = false;
      for (int r = 0; r < 3; ++r) {
        const DdpRank& rank = trainer.rank(r);
        const std::string at = "ZeRO-" + std::to_string(zero) + " after " + e.stage.title + " rank " + std::to_string(r);
        EXPECT_EQ(rank.flat_param_shard().numel(), rank.flat_layout().shard_numel()) << at;
        EXPECT_EQ(rank.gathered_params().defined(), gathered) << at;
        EXPECT_EQ(rank.params().empty(), !gathered) << at;
        if (gathered) {
          EXPECT_EQ(rank.gathered_params().numel(), rank.flat_layout().padded_numel) << at;
          EXPECT_EQ(rank.params().size(), rank.flat_layout().entries.size()) << at;
        }
      }
    }
    EXPECT_EQ(gathers, zero == 3 ? 2 : 1);
    for (int r = 0; r < 3; ++r) {
      EXPECT_FALSE(trainer.rank(r).gathered_params().defined());
      EXPECT_TRUE(trainer.rank(r).params().empty()) << "only the shard persists after the step";
      EXPECT_FALSE(trainer.rank(r).flat_grads().defined());
      EXPECT_TRUE(trainer.rank(r).flat_grad_shard().defined());
    }
  }
}

// DdpIteration::step with snapshots on runs the same rank code as run_to_end, stage by stage: the
// same bits, over two iterations (the second one without Construct).
TEST(ZeroStrategy, SteppingStageByStageGivesTheBitsOfRunToEnd) {
  const ModelSpec spec = uneven_mlp(DType::Float32, false);
  const TensorMap state = Model(spec).initial_state(35);
  const Batch batch = random_batch(10, 5, 3, 36, DType::Float32);
  for (int zero : {1, 2, 3}) {
    const OptimizerSettings adam = optimizer_cases()[2].settings;
    const ZeroRun through = run_zero(zero, 3, spec, state, batch, adam, 2);
    DdpTrainer stepped(DeviceSet::create("cpu:3"), Model(spec), state, zero_options(zero, adam));
    for (int i = 0; i < 2; ++i) {
      DdpIteration it(stepped, batch.input, batch.target);
      it.set_snapshots(true);
      while (!it.finished()) it.step();
    }
    const auto results = stepped.results();
    for (int r = 0; r < 3; ++r) {
      const DdpRankResult &a = through.results[static_cast<size_t>(r)], &b = results[static_cast<size_t>(r)];
      const std::string at = "ZeRO-" + std::to_string(zero) + " rank " + std::to_string(r);
      EXPECT_EQ(a.loss, b.loss) << at;
      EXPECT_TRUE(same_values(a.output, b.output)) << at;
      EXPECT_TRUE(same_values(a.flat_param, b.flat_param)) << at;
      EXPECT_TRUE(same_values(a.flat_grad, b.flat_grad)) << at;
      expect_same_maps(a.state, b.state, at + " state");
      expect_same_maps(a.grads, b.grads, at + " grads");
      expect_same_maps(a.optim, b.optim, at + " optim");
      expect_same_maps(a.flat_state, b.flat_state, at + " flat state");
    }
  }
}
