// The sharded strategies stage by stage and in what they hand on: each stage's plan (PyTorch's
// order of all-gathers, frees, reduce-scatter and broadcasts), the shard part of every rank's
// snapshot, the memory each rank accounts to the gathered parameter and the optimizer, the rank
// codec (how a launched rank sends its result to rank 0), and `dpv step --zero`'s output names,
// shapes and metadata (ddp_step_output + add_zero_outputs).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/ddp/ddp_output.h"
#include "engine/ddp/ddp_rank_codec.h"
#include "engine/ddp/rank_snapshot.h"
#include "engine/optim/optimizer.h"
#include "zero_test_support.h"

using namespace dpv;
using namespace dpv::testing;

namespace {

using K = StageKind;

std::vector<K> kinds(const std::vector<Stage>& plan) {
  std::vector<K> out;
  for (const Stage& s : plan) out.push_back(s.kind);
  return out;
}

OptimizerSettings adam() {
  OptimizerSettings o;
  o.kind = OptimizerKind::Adam;
  o.lr = 0.01;
  return o;
}

}  // namespace

TEST(ZeroStages, EachStrategysPlanInPyTorchsOrder) {
  const Model model(uneven_mlp(DType::Float64));  // 4 layers, BatchNorm buffers
  const std::vector<K> forward{K::Forward, K::Forward, K::Forward, K::Forward};
  const std::vector<K> backward{K::Backward, K::Backward, K::Backward, K::Backward};
  auto join = [](std::initializer_list<std::vector<K>> parts) {
    std::vector<K> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  const std::vector<std::vector<K>> want{
      join({{K::BroadcastBuffers}, forward, {K::Loss}, backward, {K::Finalize, K::Step}}),
      join({{K::BroadcastBuffers}, forward, {K::Loss}, backward, {K::Finalize, K::Step, K::BroadcastParams}}),
      join({{K::BroadcastBuffers, K::GatherParams}, forward, {K::Loss}, backward, {K::ReduceScatter, K::Step}}),
      join({{K::BroadcastBuffers, K::GatherParams}, forward, {K::FreeParams, K::Loss, K::GatherParams}, backward,
            {K::ReduceScatter, K::Step}}),
  };
  for (int zero = 0; zero <= 3; ++zero) {
    const std::vector<Stage> plan = rank_iteration_plan(model, zero_options(zero, {}));
    EXPECT_EQ(kinds(plan), want[static_cast<size_t>(zero)]) << "ZeRO-" << zero;
    // Forward 0..3, Backward 3..0.
    std::vector<int> layers;
    for (const Stage& s : plan)
      if (s.kind == K::Forward || s.kind == K::Backward) layers.push_back(s.layer);
    EXPECT_EQ(layers, (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0})) << "ZeRO-" << zero;
  }
  // Without buffers to broadcast the plan starts with the gather; the driver adds Construct and Sample.
  ModelSpec plain;
  plain.layers = {linear(5, 7), relu(), linear(7, 3)};
  plain.dtype = DType::Float64;
  EXPECT_EQ(kinds(rank_iteration_plan(Model(plain), zero_options(2, {}))).front(), K::GatherParams);
  DdpTrainer trainer(DeviceSet::create("cpu:2"), Model(plain), Model(plain).initial_state(1), zero_options(3, {}));
  const Batch batch = random_batch(4, 5, 3, 2);
  DdpIteration first(trainer, batch.input, batch.target);
  const auto first_kinds = kinds(first.plan());
  ASSERT_GE(first_kinds.size(), 3u);
  EXPECT_EQ(std::vector<K>(first_kinds.begin(), first_kinds.begin() + 3),
            (std::vector<K>{K::Construct, K::Sample, K::GatherParams}));
}

// Every rank's snapshot after every stage carries its shard: ZeRO-1 the parameters it owns,
// FSDP its slice, the padding in it, and whether the full parameter and gradient exist now.
TEST(ZeroStages, SnapshotsCarryEachRanksShard) {
  const ModelSpec spec = uneven_mlp(DType::Float64);
  const TensorMap state = Model(spec).initial_state(41);
  const Batch batch = random_batch(7, 5, 3, 42);
  const int W = 3;
  for (int zero : {1, 2, 3}) {
    DdpTrainer trainer(DeviceSet::create("cpu:3"), Model(spec), state, zero_options(zero, adam()));
    const FlatLayout layout = make_flat_layout(param_extents_of(spec), W);
    const ZeroPartition partition = zero1_partition(param_extents_of(spec), W);
    for (int iteration = 0; iteration < 2; ++iteration) {
      DdpIteration it(trainer, batch.input, batch.target);
      it.set_snapshots(true);
      bool gathered = false, grads = false, averaged = iteration > 0;
      while (!it.finished()) {
        const StageEvent e = it.step();
        const K kind = e.stage.kind;
        if (kind == K::GatherParams) gathered = true;
        if (kind == K::FreeParams || kind == K::ReduceScatter) gathered = false;
        if (kind == K::Backward && zero >= 2) grads = true, averaged = false;
        if (kind == K::ReduceScatter) grads = false, averaged = true;
        ASSERT_EQ(e.ranks.size(), static_cast<size_t>(W));
        if (kind == K::Construct) continue;
        for (int r = 0; r < W; ++r) {
          const ShardState& s = e.ranks[static_cast<size_t>(r)].shard;
          const std::string at = "ZeRO-" + std::to_string(zero) + " iteration " + std::to_string(iteration) +
                                 " after " + e.stage.title + " rank " + std::to_string(r);
          EXPECT_EQ(s.stage, zero) << at;
          if (zero == 1) {
            EXPECT_EQ(s.owned_params, partition[static_cast<size_t>(r)]) << at;
            EXPECT_EQ(s.shard_numel, 0) << at;
            EXPECT_FALSE(s.full_params) << at;
            continue;
          }
          EXPECT_TRUE(s.owned_params.empty()) << at;
          EXPECT_EQ(s.shard_begin, layout.shard_begin(r)) << at;
          EXPECT_EQ(s.shard_numel, layout.shard_numel()) << at;
          EXPECT_EQ(s.padding_in_shard, layout.shard_numel() - layout.shard_real_numel(r)) << at;
          EXPECT_EQ(s.full_params, gathered) << at;
          EXPECT_EQ(s.full_grads, grads) << at;
          EXPECT_EQ(s.grad_shard_averaged, averaged) << at;
          EXPECT_EQ(s.shard_head, trainer.rank(r).flat_param_shard().to_doubles(kRankHeadValues)) << at;
          if (averaged) {
            EXPECT_EQ(s.grad_shard_head, trainer.rank(r).flat_grad_shard().to_doubles(kRankHeadValues)) << at;
          }
        }
      }
    }
  }
  // 81 elements on 3 ranks: only rank 2's slice ends in padding.
  EXPECT_EQ(make_flat_layout(param_extents_of(spec), W).shard_real_numel(2), 26);
}

// What each rank accounts (set_memory_accounts, no snapshots): the gathered flat parameter only
// while gathered, and optimizer state for the rank's share alone.
TEST(ZeroStages, MemoryAccountsShowTheGatheredParameterAndTheShardedOptimizerState) {
  const ModelSpec spec = uneven_mlp(DType::Float64);
  const TensorMap state = Model(spec).initial_state(43);
  const Batch batch = random_batch(9, 5, 3, 44);
  const int W = 3;
  const FlatLayout layout = make_flat_layout(param_extents_of(spec), W);
  const ZeroPartition partition = zero1_partition(param_extents_of(spec), W);
  for (int zero : {0, 1, 2, 3}) {
    DdpTrainer trainer(DeviceSet::create("cpu:3"), Model(spec), state, zero_options(zero, adam()));
    for (int iteration = 0; iteration < 2; ++iteration) {
      DdpIteration it(trainer, batch.input, batch.target);
      it.set_memory_accounts(true);
      bool gathered = false;
      while (!it.finished()) {
        const StageEvent e = it.step();
        if (e.stage.kind == K::GatherParams) gathered = true;
        if (e.stage.kind == K::FreeParams || e.stage.kind == K::ReduceScatter) gathered = false;
        if (e.stage.kind == K::Construct) continue;
        ASSERT_EQ(e.devices.size(), static_cast<size_t>(W));
        for (int r = 0; r < W; ++r) {
          const MemoryBreakdown& m = e.devices[static_cast<size_t>(r)].memory;
          const std::string at = "ZeRO-" + std::to_string(zero) + " after " + e.stage.title + " rank " + std::to_string(r);
          EXPECT_EQ(m.gathered, gathered ? layout.padded_numel * 8 : 0) << at;
          if (e.stage.kind != K::Step && iteration == 0) continue;  // Adam's state appears at the first step
          int64_t state_elements = 0;  // exp_avg and exp_avg_sq of what this rank steps
          if (zero == 0) state_elements = layout.numel;
          if (zero == 1)
            for (const std::string& name : partition[static_cast<size_t>(r)])
              for (const FlatEntry& entry : layout.entries) state_elements += entry.name == name ? entry.numel : 0;
          if (zero >= 2) state_elements = layout.shard_numel();
          EXPECT_EQ(m.optimizer, 2 * 8 * state_elements) << at;
        }
      }
    }
  }
}

TEST(ZeroStages, TheRankCodecCarriesEveryShardedField) {
  const ModelSpec spec = uneven_mlp(DType::Float32);
  const TensorMap state = Model(spec).initial_state(45);
  const Batch batch = random_batch(8, 5, 3, 46, DType::Float32);
  for (int zero : {1, 2, 3}) {
    const ZeroRun run = run_zero(zero, 3, spec, state, batch, adam(), 2);
    for (const DdpRankResult& want : run.results) {
      const std::string at = "ZeRO-" + std::to_string(zero) + " rank " + std::to_string(want.rank);
      const DdpRankResult got = decode_rank_result(encode_rank_result(want), "rank's result");
      EXPECT_EQ(got.rank, want.rank) << at;
      EXPECT_EQ(got.zero_stage, zero) << at;
      EXPECT_EQ(got.partition, want.partition) << at;
      EXPECT_EQ(got.flat_layout.numel, want.flat_layout.numel) << at;
      EXPECT_EQ(got.flat_layout.padded_numel, want.flat_layout.padded_numel) << at;
      EXPECT_EQ(got.flat_layout.world, want.flat_layout.world) << at;
      ASSERT_EQ(got.flat_layout.entries.size(), want.flat_layout.entries.size()) << at;
      for (size_t i = 0; i < want.flat_layout.entries.size(); ++i) {
        const FlatEntry &g = got.flat_layout.entries[i], &w = want.flat_layout.entries[i];
        EXPECT_EQ(g.name, w.name) << at;
        EXPECT_EQ(g.offset, w.offset) << at;
        EXPECT_EQ(g.numel, w.numel) << at;
        EXPECT_EQ(g.shape, w.shape) << at;
      }
      EXPECT_TRUE(same_values(got.flat_param, want.flat_param)) << at;
      EXPECT_TRUE(same_values(got.flat_grad, want.flat_grad)) << at;
      expect_same_maps(got.optim, want.optim, at + " optim");
      expect_same_maps(got.flat_state, want.flat_state, at + " flat state");
      expect_same_maps(got.state, want.state, at + " state");
      EXPECT_EQ(zero == 1, !got.optim.empty()) << at;
      EXPECT_EQ(zero >= 2, got.flat_param.defined()) << at;
    }
  }
}

TEST(ZeroStages, StepOutputHasTheContractsNamesShapesAndMetadata) {
  const ModelSpec spec = uneven_mlp(DType::Float64, false);  // Adam: see uneven_mlp
  const TensorMap state = Model(spec).initial_state(47);
  const Batch batch = random_batch(10, 5, 3, 48);
  const int W = 3;
  const auto extents = param_extents_of(spec);
  const FlatLayout layout = make_flat_layout(extents, W);
  const ZeroPartition partition = zero1_partition(extents, W);
  const ZeroRun ddp = run_zero(0, W, spec, state, batch, adam(), 2);
  const DdpStepOutput ddp_out = ddp_step_output(ddp.results, DType::Float64);
  for (int zero : {1, 2, 3}) {
    const std::string at = "ZeRO-" + std::to_string(zero);
    const ZeroRun run = run_zero(zero, W, spec, state, batch, adam(), 2);
    const DdpStepOutput out = ddp_step_output(run.results, DType::Float64);
    // Everything `dpv step --ddp` writes, with the same shapes...
    for (const auto& [name, t] : ddp_out.tensors.items()) {
      ASSERT_TRUE(out.tensors.contains(name)) << at << " " << name;
      EXPECT_EQ(out.tensors.at(name).shape(), t.shape()) << at << " " << name;
      expect_near_all(out.tensors.at(name).to_doubles(), t.to_doubles(), 1e-12, 1e-14, at + " " + name);
    }
    // ... and the sharded strategy's own tensors.
    std::set<std::string> extra;
    for (const std::string& name : out.tensors.names())
      if (!ddp_out.tensors.contains(name)) extra.insert(name);
    std::set<std::string> want_extra;
    for (int r = 0; r < W; ++r) {
      const std::string p = "rank" + std::to_string(r) + "/";
      if (zero == 1) {
        for (const std::string& param : partition[static_cast<size_t>(r)])
          for (const char* s : {"exp_avg", "exp_avg_sq"}) {
            want_extra.insert(p + "optim/" + param + "/" + s);
            EXPECT_EQ(out.tensors.at(p + "optim/" + param + "/" + s).shape(), ddp_out.tensors.at("state/" + param).shape());
          }
        continue;
      }
      for (const char* s : {"param", "grad", "exp_avg", "exp_avg_sq"}) {
        want_extra.insert(p + "flat/" + s);
        EXPECT_EQ(out.tensors.at(p + "flat/" + s).shape(), Shape{layout.shard_numel()}) << at << " " << s;
      }
    }
    EXPECT_EQ(extra, want_extra) << at;
    EXPECT_EQ(out.metadata.at("zero.stage"), std::to_string(zero));
    EXPECT_EQ(out.metadata.at("world_size"), "3");
    if (zero == 1) {
      EXPECT_EQ(nlohmann::json::parse(out.metadata.at("zero.partition")).get<ZeroPartition>(), partition);
      EXPECT_EQ(out.metadata.at("ddp.buckets"), ddp_out.metadata.at("ddp.buckets")) << "ZeRO-1 runs over DDP's buckets";
      EXPECT_FALSE(out.metadata.contains("fsdp.flat"));
      continue;
    }
    EXPECT_FALSE(out.metadata.contains("ddp.buckets")) << at << ": FSDP has no buckets";
    EXPECT_FALSE(out.metadata.contains("zero.partition")) << at;
    const auto flat = nlohmann::json::parse(out.metadata.at("fsdp.flat"));
    ASSERT_EQ(flat.size(), layout.entries.size()) << at;
    for (size_t i = 0; i < flat.size(); ++i)
      EXPECT_EQ(flat[i], nlohmann::json::array({layout.entries[i].name, layout.entries[i].offset, layout.entries[i].numel}));
    EXPECT_EQ(out.metadata.at("fsdp.padded_numel"), "75") << at;  // 73 elements on 3 ranks
    EXPECT_EQ(std::stoll(out.metadata.at("fsdp.padded_numel")), layout.padded_numel) << at;
  }
}
