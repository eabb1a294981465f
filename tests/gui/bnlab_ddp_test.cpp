// The BatchNorm lab page's DDP pair: the charts plot the session's values (the session's own tests,
// against independent DDP runs, are in tests/lessons/bnlab_ddp_session_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <qcustomplot.h>

#include "course/bnlab_session.h"
#include "gui/common/context.h"
#include "gui/bnlab/charts.h"
#include "gui/bnlab/page.h"
#include "gui_test_support.h"

namespace gui {

using dpv::course::BnLabSession;

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

}  // namespace

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
    const auto loss = page.charts()->seriesData(BnLabCharts::Loss, BnLabCharts::lossSeries(which));
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
