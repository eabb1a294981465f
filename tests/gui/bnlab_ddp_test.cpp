// The BatchNorm lab's DDP pair against independent DDP runs: per-rank BatchNorm normalises each
// rank's DistributedSampler shard and keeps rank 0's buffers; SyncBatchNorm under DDP stays at the
// one-device reference and takes the same steps as the lab's DataParallel "SyncBN" extension.
#include <gtest/gtest.h>

#include <cmath>
#include <qcustomplot.h>

#include "engine/ddp/ddp.h"
#include "engine/device.h"
#include "gui/common/context.h"
#include "gui/bnlab/charts.h"
#include "gui/bnlab/page.h"
#include "gui/bnlab/session.h"
#include "gui_test_support.h"

namespace gui {

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
  options.lr = config.learningRate;
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
  EXPECT_NEAR(ddp.loss, iteration->mean_loss(), 1e-6);
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

// The page draws the DDP pair from the session's values: the distance chart shows SyncBatchNorm
// under DDP at the reference, per-rank BatchNorm under DDP away from it, and the batch charts hold
// one bar per rank for the DDP shards.
TEST(BnLabDdpPage, DistanceChartShowsSyncBatchNormUnderDdpAtTheReference) {
  AppContext context;
  BatchNormLabPage page(&context);
  page.resize(1280, 800);
  page.setStepsPerSecond(0);
  const int64_t steps = 12;
  page.setStepLimit(steps);
  page.setConfig(ddpConfig(32));
  ASSERT_TRUE(waitUntil([&] { return page.isConfigured() || page.hasFailed(); }, 60000));
  page.start();
  ASSERT_TRUE(waitUntil([&] { return page.charts()->stepCount() >= steps && !page.isRunning(); }, 60000))
      << page.failure().toStdString();

  // The same steps straight from a session: the plotted values are the session's.
  BnLabSession session(ddpConfig(32));
  std::vector<BnLabStep> expected;
  for (int64_t i = 0; i < steps; ++i) expected.push_back(session.step());
  for (BnLabModel which : {BnLabDdpPerRank, BnLabDdpSync}) {
    const auto params = page.charts()->seriesData(BnLabCharts::Distance, BnLabCharts::paramDistanceSeries(which));
    ASSERT_EQ(params.size(), steps) << bnlab_model_name(which);
    for (int64_t i = 0; i < steps; ++i)
      EXPECT_NEAR(params[i].y(), std::max(expected[static_cast<size_t>(i)].models[which].paramDistance, BnLabCharts::kDistanceFloor),
                  1e-6 + 1e-3 * params[i].y())
          << bnlab_model_name(which) << " step " << i + 1;
    const auto loss = page.charts()->seriesData(BnLabCharts::LossAccuracy, BnLabCharts::lossSeries(which));
    ASSERT_EQ(loss.size(), steps);
    EXPECT_NEAR(loss.back().y(), expected.back().models[which].loss, 1e-6);
  }
  const auto sync = page.charts()->seriesData(BnLabCharts::Distance, BnLabCharts::paramDistanceSeries(BnLabDdpSync));
  const auto perRank = page.charts()->seriesData(BnLabCharts::Distance, BnLabCharts::paramDistanceSeries(BnLabDdpPerRank));
  EXPECT_LT(sync.back().y(), 1e-4);
  EXPECT_GT(perRank.back().y(), 1e-3);
  const auto bars = page.charts()->seriesData(BnLabCharts::BatchMean, BnLabCharts::chunkSeries(BnLabDdpPerRank));
  ASSERT_EQ(bars.size(), 4);
  const auto& rank2 = expected.back().models[BnLabDdpPerRank].layers.at(static_cast<size_t>(page.charts()->layerSlot()));
  EXPECT_NEAR(bars[2].y(), rank2.chunks.at(2).mean.at(static_cast<size_t>(page.charts()->channel())), 1e-9);
  // Rank 0's running statistics: the ones DDP keeps in sync by broadcasting.
  const auto running = page.charts()->seriesData(BnLabCharts::RunningMean, BnLabCharts::runningSeries(BnLabDdpPerRank));
  ASSERT_EQ(running.size(), steps);
  EXPECT_NEAR(running.back().y(), rank2.runningMean.at(static_cast<size_t>(page.charts()->channel())), 1e-9);
}

}  // namespace gui

namespace gui {

// 30 rows on 4 devices: DataParallel's chunks are 8, 8, 8, 6 and DDP pads every shard to 8; the
// device ticks of the batch charts name both where they differ.
TEST(BnLabDdpCharts, DeviceTicksNameThePaddedDdpShardBesideTheChunk) {
  BnLabSession session(ddpConfig(30));
  const BnLabStep step = session.step();
  EXPECT_EQ(step.chunks, (std::vector<int64_t>{8, 8, 8, 6}));
  EXPECT_EQ(step.shards, (std::vector<int64_t>{8, 8, 8, 8}));
  BnLabCharts charts;
  charts.clear(4);
  charts.appendSteps({step});
  auto ticker = charts.plot(BnLabCharts::BatchMean)->xAxis->ticker().dynamicCast<QCPAxisTickerText>();
  ASSERT_TRUE(ticker);
  EXPECT_EQ(ticker->ticks().value(0), QStringLiteral("GPU 0\n8"));
  EXPECT_EQ(ticker->ticks().value(3), QStringLiteral("GPU 3\n6 · DDP 8"));
}

}  // namespace gui
