// Issue 26: the Iteration page tells the truth and keeps the learner's place: DataParallel chips
// open the whole inspector, a settings change steps back to the stage shown, a jump to a failing
// stage shows the failure there, DDP failures speak of ranks and shards and mark the rank, the loss
// strip says whose loss it is, and the page follows an iteration another page ran.
#include <QTreeWidget>

#include "ddp_test_support.h"
#include "gui/iteration/loss_strip.h"
#include "gui/iteration/tensor_inspector.h"

namespace gui {
namespace {

using IterationPlaceTest = IterationPageTest;

// The index of the first stage of `kind` in the page's plan (-1: none).
int firstStage(EngineController* engine, dpv::StageKind kind) {
  const auto& plan = engine->info().plan;
  for (int i = 0; i < static_cast<int>(plan.size()); ++i)
    if (plan[static_cast<size_t>(i)].kind == kind) return i;
  return -1;
}

TEST_F(IterationPlaceTest, ADataParallelChipOpensTheWholeInspector) {
  start(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 8));
  const int replicate = firstStage(engine_.get(), dpv::StageKind::Replicate);
  ASSERT_GE(replicate, 0);
  for (int i = 0; i <= replicate; ++i) ASSERT_TRUE(stepTo(i));
  ASSERT_TRUE(page_->inspectChip(1, dpv::TensorRole::Param));
  settleEvents();
  EXPECT_GT(page_->inspector()->rowCount(), 0);
  EXPECT_TRUE(page_->inspector()->tree()->isVisible()) << "the tensor list must be on screen, not only the summary line";
  EXPECT_TRUE(page_->inspector()->heatMap()->isVisible()) << "a small parameter's values as a heat map";
  EXPECT_GT(page_->inspector()->heatMap()->rows(), 0);
}

TEST_F(IterationPlaceTest, ChangingASettingStepsBackToTheStageShown) {
  start(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10));
  for (int i = 0; i <= 3; ++i) ASSERT_TRUE(stepTo(i));
  const dpv::Stage shown = engine_->info().plan[3];
  context_->setSettings(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 10));
  ASSERT_TRUE(waitUntil([&] {
    return engine_->hasIteration() && engine_->info().chunks == std::vector<int64_t>{5, 5} && !page_->waitingForEngine() &&
           !engine_->busy() && page_->cursor() >= 0;
  }));
  ASSERT_GE(page_->cursor(), 0);
  const dpv::Stage now = engine_->info().plan[static_cast<size_t>(page_->cursor())];
  EXPECT_EQ(now.kind, shown.kind);
  EXPECT_EQ(now.layer, shown.layer);
  EXPECT_EQ(page_->scene()->deviceCount(), 2);
}

TEST_F(IterationPlaceTest, AJumpToAFailingStageShowsTheFailureThereNotTheStart) {
  // torch.chunk(10, 4) = 3,3,3,1: replica 3's BatchNorm refuses its one sample.
  start(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 10));
  const int last = static_cast<int>(engine_->info().plan.size()) - 1;
  bool done = false;
  page_->seekTo(last, [&] { done = true; });
  ASSERT_TRUE(waitUntil([&] { return done; }));
  ASSERT_FALSE(page_->errorText().isEmpty());
  EXPECT_EQ(page_->cursor(), static_cast<int>(engine_->events().size()) - 1) << "at the last stage that ran";
  EXPECT_GE(page_->cursor(), 0) << "not back at 'press Step to begin'";
  EXPECT_FALSE(page_->scene()->deviceBox(3)->failure().isEmpty()) << "device 3 is marked";
}

TEST_F(IterationPlaceTest, ADdpFailureSpeaksOfRanksAndShardsAndMarksTheRank) {
  // Four samples on four ranks: every shard holds one sample, and BatchNorm refuses it.
  start(ddpSettings(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 4));
  const int stages = static_cast<int>(engine_->info().plan.size());
  for (int i = 0; i < stages && page_->errorText().isEmpty(); ++i) ASSERT_TRUE(stepTo(i));
  const QString error = page_->errorText();
  ASSERT_FALSE(error.isEmpty()) << "the one-sample shards did not fail";
  ASSERT_EQ(engine_->lastFailure().reason, dpv::ErrorReason::BatchNormSingleValue);
  const QString advice = error.section(QLatin1Char('\n'), -1);
  EXPECT_TRUE(advice.contains(QLatin1String("rank")) && advice.contains(QLatin1String("shard"))) << advice.toStdString();
  EXPECT_FALSE(advice.contains(QLatin1String("chunk")) || advice.contains(QLatin1String("device"))) << advice.toStdString();
  const int rank = engine_->lastFailure().site.rank;
  ASSERT_GE(rank, 0);
  const DdpSceneState& state = page_->ddpScene()->state();
  for (const DdpRankView& view : state.ranks) EXPECT_EQ(view.failure.isEmpty(), view.rank != rank) << "rank " << view.rank;
}

TEST_F(IterationPlaceTest, TheLossStripSaysWhoseLossItIs) {
  start(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 8));
  EXPECT_TRUE(page_->lossStrip()->caption().startsWith(QLatin1String("Loss (whole batch)"))) << page_->lossStrip()->caption().toStdString();
  page_->setStrategy(dpv::StrategyKind::DistributedDataParallel);
  ASSERT_TRUE(waitUntil([&] { return engine_->hasIteration() && engine_->info().ddp && !engine_->busy(); }));
  EXPECT_TRUE(page_->lossStrip()->yTitle().contains(QLatin1String("rank 0"))) << page_->lossStrip()->yTitle().toStdString();
  EXPECT_TRUE(page_->lossStrip()->caption().contains(QLatin1String("its shard"))) << page_->lossStrip()->caption().toStdString();
}

TEST_F(IterationPlaceTest, AfterAnotherPageRanAnIterationThePageShowsTheStateTheEngineHas) {
  start(ddpSettings(QStringLiteral("cpu:2"), QStringLiteral("simple"), 8));
  page_->hide();  // the Timeline page is on screen and runs whole iterations
  engine_->requestIteration();
  ASSERT_TRUE(waitUntil([&] { return engine_->iterationComplete() && !engine_->busy(); }));
  engine_->requestIteration();
  ASSERT_TRUE(waitUntil([&] { return engine_->info().iteration == 2 && engine_->iterationComplete() && !engine_->busy(); }));
  page_->show();
  EXPECT_EQ(page_->cursor(), static_cast<int>(engine_->events().size()) - 1);
  for (const DdpRankView& rank : page_->ddpScene()->state().ranks) EXPECT_TRUE(rank.constructed) << "rank " << rank.rank;
  // Before iteration 2's first stage the ranks are DDP-built too (iteration 1 built them).
  page_->restart();
  for (const DdpRankView& rank : page_->ddpScene()->state().ranks) EXPECT_TRUE(rank.constructed) << "rank " << rank.rank;
}

TEST_F(IterationPlaceTest, IterationTwosBroadcastBuffersStageHoldsTheRebuiltBuckets) {
  // PyTorch 1.13 rebuilds the buckets in DDP.forward before _sync_buffers: from iteration 2's
  // first stage on, the rebuilt buckets apply.
  start(ddpSettings(QStringLiteral("cpu:2"), QStringLiteral("mlp-bn"), 8));
  engine_->requestIteration();
  ASSERT_TRUE(waitUntil([&] { return engine_->iterationComplete() && !engine_->busy(); }));
  engine_->requestIteration();
  ASSERT_TRUE(waitUntil([&] { return engine_->info().iteration == 2 && engine_->iterationComplete() && !engine_->busy(); }));
  const dpv::StageEvent* broadcast = nullptr;
  const dpv::StageEvent* forward = nullptr;
  for (const auto& ev : engine_->events()) {
    if (ev.stage.kind == dpv::StageKind::BroadcastBuffers) broadcast = &ev;
    if (ev.stage.kind == dpv::StageKind::Forward && !forward) forward = &ev;
  }
  ASSERT_NE(broadcast, nullptr) << "mlp-bn has buffers to broadcast";
  ASSERT_NE(forward, nullptr);
  ASSERT_EQ(broadcast->ranks.size(), forward->ranks.size());
  for (size_t r = 0; r < broadcast->ranks.size(); ++r) {
    EXPECT_TRUE(broadcast->ranks[r].buckets_rebuilt) << "rank " << r;
    ASSERT_EQ(broadcast->ranks[r].buckets.size(), forward->ranks[r].buckets.size()) << "rank " << r;
    for (size_t b = 0; b < broadcast->ranks[r].buckets.size(); ++b)
      EXPECT_EQ(broadcast->ranks[r].buckets[b].params, forward->ranks[r].buckets[b].params) << "rank " << r << " bucket " << b;
  }
}

}  // namespace
}  // namespace gui
