// DataParallel semantics: summed gradients, per-device BatchNorm, replica 0's buffers, the plan.
#include <gtest/gtest.h>

#include "tests/engine/dp_test_support.h"

using namespace dpv;
using namespace dpv::testing;

namespace {
ModelSpec mlp_no_bn(DType dtype = DType::Float64) {
  ModelSpec m;
  m.layers = {linear(4, 8), relu(), linear(8, 3)};
  m.dtype = dtype;
  return m;
}
}  // namespace

TEST(DataParallel, GradientsEqualSingleDeviceWithoutBatchNorm) {
  const ModelSpec spec = mlp_no_bn();
  const TensorMap state = Model(spec).initial_state(7);
  const Batch batch = random_batch(10, 4, 3, 11);
  const Result one = run_iteration("cpu:1", spec, state, batch);
  for (const char* devices : {"cpu:2", "cpu:3", "cpu:4", "cpu:8"}) {
    const Result dp = run_iteration(devices, spec, state, batch);
    EXPECT_NEAR(dp.loss, one.loss, 1e-12) << devices;
    EXPECT_LT(max_abs_diff(dp.output, one.output), 1e-12) << devices;
    for (const auto& [name, g] : one.grads.items())
      EXPECT_LT(max_abs_diff(dp.grads.at(name).to_doubles(), g.to_doubles()), 1e-12) << devices << " " << name;
    for (const auto& [name, p] : one.state.items())
      EXPECT_LT(max_abs_diff(dp.state.at(name).to_doubles(), p.to_doubles()), 1e-12) << devices << " " << name;
  }
}

TEST(DataParallel, PerDeviceBatchNormSumsPerChunkGradientsAndKeepsOnlyDeviceZeroStatistics) {
  const ModelSpec spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(3);
  const Batch batch = random_batch(12, 4, 3, 5);  // chunks 3,3,3,3 on cpu:4
  const Result dp = run_iteration("cpu:4", spec, state, batch);
  ASSERT_EQ(dp.chunks, (std::vector<int64_t>{3, 3, 3, 3}));
  // Each chunk alone on one device: its statistics, and its gradient with the loss averaged over 3.
  std::vector<double> expected_grad_weight;
  for (int j = 0; j < 4; ++j) {
    const Result single = run_iteration("cpu:1", spec, state, rows(batch, 3 * j, 3 * j + 3));
    // The per-device statistics the engine reports equal the chunk's own.
    ASSERT_EQ(single.bn.size(), 1u);
    const BatchNormStats& s = dp.bn[static_cast<size_t>(j)];
    EXPECT_EQ(s.device, j);
    EXPECT_LT(max_abs_diff(s.mean, single.bn[0].mean), 1e-12);
    EXPECT_LT(max_abs_diff(s.var, single.bn[0].var), 1e-12);
    // Output rows of chunk j equal the chunk run alone.
    std::vector<double> rows_j(dp.output.begin() + 9 * j, dp.output.begin() + 9 * j + 9);
    EXPECT_LT(max_abs_diff(rows_j, single.output), 1e-12);
    // DP sums replica gradients; each replica's loss gradient carries 1/N = (3/12) * (1/3).
    auto g = single.grads.at("0.weight").to_doubles();
    if (expected_grad_weight.empty()) expected_grad_weight.assign(g.size(), 0.0);
    for (size_t i = 0; i < g.size(); ++i) expected_grad_weight[i] += g[i] * 3.0 / 12.0;
    if (j == 0) {
      // Only replica 0's running statistics survive (chunk 0 alone, unbiased with n0/(n0-1)).
      EXPECT_LT(max_abs_diff(dp.state.at("1.running_mean").to_doubles(), single.state.at("1.running_mean").to_doubles()), 1e-12);
      EXPECT_LT(max_abs_diff(dp.state.at("1.running_var").to_doubles(), single.state.at("1.running_var").to_doubles()), 1e-12);
    }
  }
  EXPECT_LT(max_abs_diff(dp.grads.at("0.weight").to_doubles(), expected_grad_weight), 1e-12);
  EXPECT_EQ(dp.state.at("1.num_batches_tracked").item(), 1.0);
}

TEST(DataParallel, RunningStatisticsAndBatchCountAfterSeveralSteps) {
  const ModelSpec spec = mlp_bn();
  const Batch batch = random_batch(8, 4, 3, 6);  // chunks 4, 4 on cpu:2
  TrainOptions opt;
  opt.optimizer.lr = 0.1;
  opt.optimizer.momentum = 0.9;
  Trainer dp(DeviceSet::create("cpu:2"), Model(spec), Model(spec).initial_state(4), opt);
  for (int step = 1; step <= 4; ++step) {
    // What replica 0 alone does to the running statistics from the current state: chunk 0 only.
    const TensorMap before = dp.state_to_host();
    const Result chunk0 = run_iteration("cpu:1", spec, before, rows(batch, 0, 4));
    Iteration(dp, batch.input, batch.target).run_to_end();
    const TensorMap after = dp.state_to_host();
    EXPECT_LT(max_abs_diff(after.at("1.running_mean").to_doubles(), chunk0.state.at("1.running_mean").to_doubles()), 1e-12);
    EXPECT_LT(max_abs_diff(after.at("1.running_var").to_doubles(), chunk0.state.at("1.running_var").to_doubles()), 1e-12);
    EXPECT_EQ(after.at("1.num_batches_tracked").item(), static_cast<double>(step));
  }
  EXPECT_EQ(dp.steps_taken(), 4);
}

TEST(DataParallel, PlanHasNoReplicateOrGatherOnOneDevice) {
  const ModelSpec spec = mlp_no_bn();
  Trainer one(DeviceSet::create("cpu:1"), Model(spec), Model(spec).initial_state(1), {});
  const Batch batch = random_batch(6, 4, 3, 2);
  Iteration it(one, batch.input, batch.target);
  for (const Stage& s : it.plan()) {
    EXPECT_NE(s.kind, StageKind::Replicate);
    EXPECT_NE(s.kind, StageKind::Gather);
    EXPECT_NE(s.kind, StageKind::ReduceGrads);
  }
  Trainer four(DeviceSet::create("cpu:4"), Model(spec), Model(spec).initial_state(1), {});
  Iteration it4(four, batch.input, batch.target);
  it4.set_snapshots(true);
  EXPECT_EQ(it4.chunks(), (std::vector<int64_t>{2, 2, 2}));
  int replicate = 0, gather = 0, reduce = 0;
  for (const Stage& s : it4.plan()) {
    replicate += s.kind == StageKind::Replicate;
    gather += s.kind == StageKind::Gather;
    reduce += s.kind == StageKind::ReduceGrads;
  }
  EXPECT_EQ(replicate + gather + reduce, 3);
  // Stepping through reports every stage; device 3 stays idle.
  while (!it4.finished()) {
    StageEvent e = it4.step();
    ASSERT_EQ(e.devices.size(), 4u);
    EXPECT_EQ(e.devices[3].chunk_rows, 0);
    EXPECT_FALSE(e.devices[3].has_replica);
    if (e.stage.kind == StageKind::ReduceGrads) {
      ASSERT_EQ(e.collectives.size(), 1u);
      EXPECT_EQ(e.collectives[0].ranks, 3);
    }
  }
}

TEST(DataParallel, OneSampleChunkWithBatchNormRaisesInTheLastReplica) {
  const ModelSpec spec = mlp_bn();
  const Batch batch = random_batch(10, 4, 3, 8);  // 3,3,3,1
  Trainer trainer(DeviceSet::create("cpu:4"), Model(spec), Model(spec).initial_state(1), {});
  Iteration it(trainer, batch.input, batch.target);
  try {
    it.run_to_end();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), "ValueError");
    EXPECT_EQ(std::string(e.what()),
              "Caught ValueError in replica 3 on device 3. Expected more than 1 value per channel when training, "
              "got input size torch.Size([1, 6])");
  }
}

TEST(DataParallel, ReplicaZeroAliasesTheOriginalParameters) {
  const ModelSpec spec = mlp_no_bn();
  Trainer trainer(DeviceSet::create("cpu:2"), Model(spec), Model(spec).initial_state(1), {});
  const Batch batch = random_batch(4, 4, 3, 2);
  Iteration it(trainer, batch.input, batch.target);
  it.step();  // scatter
  StageEvent rep = it.step();
  ASSERT_EQ(rep.stage.kind, StageKind::Replicate);
  // The broadcast moves every parameter to device 1 only: bytes = params * 1 copy.
  size_t param_bytes = 0;
  for (const auto& d : trainer.model().parameter_decls()) param_bytes += static_cast<size_t>(shape_numel(d.shape)) * 8;
  EXPECT_EQ(rep.bytes_moved, param_bytes);
}
