// The BatchNorm lab's DDP pair against independent DDP runs: per-rank BatchNorm normalises each
// rank's DistributedSampler shard and keeps rank 0's buffers; SyncBatchNorm under DDP stays at the
// one-device reference and takes the same steps as the lab's DataParallel "SyncBN" extension.
#include <gtest/gtest.h>

#include <cmath>

#include "course/bnlab_session.h"
#include "engine/ddp/ddp.h"
#include "engine/device.h"

namespace dpv::course {

namespace {

BnLabConfig ddpConfig(int64_t batch) {
  BnLabConfig c;
  c.devices = "cpu:4";
  c.batchSize = batch;
  c.classSorted = true;
  c.seed = 5;
  c.learningRate = 0.1;
  return c;
}

double maxDiff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST(BnLabDdp, PerRankStatisticsAreEachShardsAndRunningStatisticsRankZeros) {
  const BnLabConfig config = ddpConfig(32);
  BnLabSession session(config);
  const int steps = 3;
  BnLabStep last;
  for (int i = 0; i < steps; ++i) last = session.step();

  // An independent DDP trainer over the same batches.
  const dpv::Model model(bnlab_model_spec(config.bnMomentum));
  dpv::DdpOptions options;
  options.optimizer.lr = config.learningRate;
  dpv::DdpTrainer independent(dpv::DeviceSet::create(config.devices), dpv::Model(bnlab_model_spec(config.bnMomentum)),
                              model.initial_state(config.seed), options);
  std::unique_ptr<dpv::DdpIteration> iteration;
  for (int i = 0; i < steps; ++i) {
    const dpv::Dataset batch = bnlab_batch(session.dataset(), config, i);
    iteration = std::make_unique<dpv::DdpIteration>(independent, batch.inputs, batch.targets);
    iteration->run_to_end();
  }
  const BnLabModelStep& ddp = last.models[BnLabDdpPerRank];
  ASSERT_EQ(ddp.layers.size(), session.batchnormLayers().size());
  EXPECT_EQ(last.shards, (std::vector<int64_t>{8, 8, 8, 8}));
  for (size_t slot = 0; slot < ddp.layers.size(); ++slot) {
    const BnLabLayerStats& stats = ddp.layers[slot];
    ASSERT_EQ(stats.chunks.size(), 4u) << "one set of statistics per rank";
    for (const auto& s : iteration->batchnorm_stats()) {
      if (s.layer != stats.layer || s.device < 0) continue;
      EXPECT_LT(maxDiff(stats.chunks[static_cast<size_t>(s.device)].mean, s.mean), 1e-6) << "rank " << s.device;
      EXPECT_LT(maxDiff(stats.chunks[static_cast<size_t>(s.device)].var, s.var), 1e-6) << "rank " << s.device;
    }
    const std::string prefix = model.layer_prefix(stats.layer);
    EXPECT_LT(maxDiff(stats.runningMean, independent.rank(0).buffers().at(prefix + "running_mean").to_doubles()), 1e-6);
    // Rank 0's buffers are the ones the lab plots; the other ranks' own updates differ from them.
    EXPECT_GT(maxDiff(stats.runningMean, independent.rank(3).buffers().at(prefix + "running_mean").to_doubles()), 1e-6);
  }
  EXPECT_NEAR(ddp.loss, iteration->mean_rank_loss(), 1e-6);
}

TEST(BnLabDdp, SyncBatchNormUnderDdpStaysAtTheReferenceAndPerRankDrifts) {
  BnLabSession session(ddpConfig(32));
  BnLabStep last;
  for (int i = 0; i < 8; ++i) {
    last = session.step();
    // SyncBatchNorm under DDP: the statistics of the whole global batch, so one device's step.
    EXPECT_LT(last.models[BnLabDdpSync].paramDistance, 1e-4) << "step " << last.step;
    EXPECT_LT(last.models[BnLabDdpSync].gradDistance, 1e-4) << "step " << last.step;
  }
  EXPECT_GT(last.models[BnLabDdpPerRank].paramDistance, 1e-3) << "per-rank statistics should pull away from the reference";
  // The DataParallel "SyncBN" extension computes what DDP + SyncBatchNorm computes.
  const auto& ddpParams = session.ddpTrainer(BnLabDdpSync).rank(0).params();
  const double gap = bnlab_max_abs_difference(ddpParams, session.trainer(BnLabSync).state(), ddpParams.names());
  EXPECT_LT(gap, 1e-4);
  // Every DDP rank holds the same parameters (the same averaged gradients, the same step).
  for (BnLabModel which : {BnLabDdpPerRank, BnLabDdpSync}) {
    auto& tr = session.ddpTrainer(which);
    EXPECT_EQ(bnlab_max_abs_difference(tr.rank(0).params(), tr.rank(3).params(), tr.rank(0).params().names()), 0.0);
  }
}

TEST(BnLabDdp, UnevenBatchIsPaddedForDdpWhileDataParallelFailsOnTheOneSampleChunk) {
  BnLabSession session(ddpConfig(10));  // DataParallel: 3, 3, 3, 1; DDP: 3 per rank (2 repeats)
  const auto [model, error] = session.probeFirstStep();
  EXPECT_EQ(model, "per-device BatchNorm");
  EXPECT_NE(error.find("Expected more than 1 value per channel when training"), std::string::npos) << error;
  // DDP pads the 10 rows to 3 per rank: no one-sample shard, so the same batch trains.
  const BnLabConfig config = ddpConfig(10);
  dpv::DdpTrainer ddp(dpv::DeviceSet::create(config.devices), dpv::Model(bnlab_model_spec(config.bnMomentum)),
                      dpv::Model(bnlab_model_spec(config.bnMomentum)).initial_state(config.seed), dpv::DdpOptions{});
  const dpv::Dataset batch = bnlab_batch(session.dataset(), config, 0);
  dpv::DdpIteration iteration(ddp, batch.inputs, batch.targets);
  EXPECT_NO_THROW(iteration.run_to_end());
  EXPECT_EQ(iteration.shards().back(), (std::vector<int64_t>{3, 7, 1}));
}

// The lab reports DistributedSampler's padding as a number, and the padded samples are why DDP's
// SyncBatchNorm leaves the reference with a batch of 10 on 4 ranks while it stays there with 32.
TEST(BnLabDdp, ReportsThePaddingThatMovesDdpSyncBatchNormOffTheReference) {
  BnLabSession padded(ddpConfig(10));
  BnLabStep step;
  for (int i = 0; i < 3; ++i) step = padded.step();
  EXPECT_EQ(step.batchRows, 10);
  EXPECT_EQ(step.shards, (std::vector<int64_t>{3, 3, 3, 3}));
  EXPECT_EQ(step.ddpPadding, 2);
  EXPECT_GT(step.models[BnLabDdpSync].paramDistance, 1e-4);
  EXPECT_LT(step.models[BnLabSync].paramDistance, 1e-4);  // DataParallel's merge pads nothing

  BnLabSession even(ddpConfig(32));
  for (int i = 0; i < 3; ++i) step = even.step();
  EXPECT_EQ(step.ddpPadding, 0);
  EXPECT_LT(step.models[BnLabDdpSync].paramDistance, 1e-4);
}

// A learning rate changed while the lab trains drives every model's next step and nothing else:
// at lr 0 the step leaves every parameter where it was (SGD scales momentum and weight decay by lr
// too), and the five models keep their steps.
TEST(BnLabDdp, ALearningRateChangeAppliesToEveryModelsNextStep) {
  BnLabSession session(ddpConfig(32));
  session.step();
  session.setLearningRate(0.0);
  std::vector<std::vector<double>> before;
  for (int m = 0; m < kBnLabModelCount; ++m) {
    const TensorMap& params = *session.strategy(static_cast<BnLabModel>(m)).tensors().params;
    before.push_back(params.at(params.names().front()).to_doubles());
  }
  const BnLabStep second = session.step();
  EXPECT_EQ(second.step, 2);
  for (int m = 0; m < kBnLabModelCount; ++m) {
    const TensorMap& params = *session.strategy(static_cast<BnLabModel>(m)).tensors().params;
    EXPECT_EQ(params.at(params.names().front()).to_doubles(), before[static_cast<size_t>(m)]) << "model " << m;
  }
  EXPECT_THROW(session.setLearningRate(-1.0), Error);
}

}  // namespace dpv::course
