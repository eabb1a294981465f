// The Iteration page in DDP mode, driven through two whole iterations on four simulated ranks and
// checked against the engine's DDP snapshot (StageEvent::ranks) at every stage: shards and their
// padding, every bucket's phase and fill, which ranks hold local or averaged gradients, the code
// lines, the lessons. Also the mode switch, and the Timeline's per-rank communication lanes.
#include "ddp_test_support.h"

#include "gui/ddp/scene.h"
#include "gui/common/code_view.h"
#include "gui/common/lesson_panel.h"
#include "gui/timeline/page.h"

#include <QGraphicsRectItem>
#include <QGraphicsSimpleTextItem>

namespace gui {

TEST_F(IterationPageTest, DdpTwoIterationsOnFourRanksMatchTheEngineAtEveryStage) {
  qputenv("DPVIZ_LESSONS", QByteArray(DPV_LESSONS_SOURCE_DIR));
  start(ddpSettings(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 10));
  qunsetenv("DPVIZ_LESSONS");
  ASSERT_TRUE(engine_->info().ddp);
  EXPECT_TRUE(page_->showingDdp());
  EXPECT_EQ(page_->codeView()->tabText(0).toStdString(), "Your DDP code");
  EXPECT_EQ(page_->ddpScene()->state().ranks.size(), 4);
  // 10 samples on 4 ranks: [0,4,8] [1,5,9] [2,6,0] [3,7,1]; the last two end with a repeat.
  EXPECT_EQ(engine_->info().shards.at(2), (std::vector<int64_t>{2, 6, 0}));

  bool sawOverlap = false, sawBroadcast = false;
  for (int iteration = 1; iteration <= 2; ++iteration) {
    // The plan is read each time: iteration 2's (no Construct, a buffer broadcast) replaces
    // iteration 1's once the first step has started it.
    for (int i = 0; i < static_cast<int>(engine_->info().plan.size()); ++i) {
      if (iteration == 2 && i == 0) {
        // The step after the last stage starts iteration 2 and shows its first stage.
        page_->stepForward();
        ASSERT_TRUE(waitUntil([&] { return engine_->info().iteration == 2 && page_->cursor() == 0 && !page_->waitingForEngine(); }));
      } else {
        ASSERT_TRUE(stepTo(i)) << "iteration " << iteration << " stage " << i;
      }
      ASSERT_TRUE(page_->errorText().isEmpty()) << page_->errorText().toStdString();
      ASSERT_EQ(engine_->info().iteration, iteration);
      const dpv::StageEvent& ev = engine_->events().at(i);
      ASSERT_EQ(ev.ranks.size(), 4u);
      const int averaged = checkStage(page_.get(), ev);
      EXPECT_FALSE(page_->lessonPanel()->lessonMissing()) << ev.stage.title;
      const QString script = page_->codeView()->lineText(0, page_->codeView()->highlightedLine(0));
      const QString source = page_->codeView()->lineText(1, page_->codeView()->highlightedLine(1));
      switch (ev.stage.kind) {
        case dpv::StageKind::Construct:
          EXPECT_TRUE(script.contains(QLatin1String("DDP(model"))) << script.toStdString();
          EXPECT_TRUE(source.contains(QLatin1String("_verify_param_shape_across_processes")));
          break;
        case dpv::StageKind::Sample: EXPECT_TRUE(script.contains(QLatin1String("DistributedSampler"))); break;
        case dpv::StageKind::BroadcastBuffers:
          sawBroadcast = true;
          EXPECT_TRUE(source.contains(QLatin1String("_check_sync_bufs_pre_fwd")));
          // Every rank's buffer now shows rank 0's values.
          for (int r = 1; r < 4; ++r)
            EXPECT_EQ(page_->ddpScene()->bufferText(r)->text().section(QLatin1Char(' '), 1).toStdString(),
                      page_->ddpScene()->bufferText(0)->text().section(QLatin1Char(' '), 1).toStdString());
          break;
        case dpv::StageKind::Loss: EXPECT_TRUE(script.contains(QLatin1String("criterion"))); break;
        case dpv::StageKind::Backward:
          EXPECT_TRUE(script.contains(QLatin1String("loss.backward()")));
          EXPECT_EQ(averaged, 0);
          // Iteration 2, first backward stage: bucket 0 is on its way while the last bucket is still empty.
          if (iteration == 2 && ev.stage.layer == static_cast<int>(engine_->info().layerNames.size()) - 1) {
            const QString first = describe(page_->ddpScene()->bucketItem(0, 0));
            const int last = static_cast<int>(ev.ranks[0].buckets.size()) - 1;
            ASSERT_GE(last, 1) << "the rebuilt layout has several buckets";
            sawOverlap = first.contains(QLatin1String("all-reducing")) || first.contains(QLatin1String("done"));
            EXPECT_TRUE(sawOverlap) << first.toStdString();
            EXPECT_TRUE(describe(page_->ddpScene()->bucketItem(0, last)).contains(QLatin1String("empty")));
          }
          break;
        case dpv::StageKind::Finalize:
          EXPECT_TRUE(source.contains(QLatin1String("finalize_backward")));
          EXPECT_EQ(averaged, 4) << "every rank holds the mean after Finalize";
          for (int r = 1; r < 4; ++r)
            EXPECT_EQ(page_->ddpScene()->gradText(r)->text().toStdString(), page_->ddpScene()->gradText(0)->text().toStdString());
          break;
        case dpv::StageKind::Step:
          EXPECT_TRUE(script.contains(QLatin1String("optimizer.step()")));
          EXPECT_EQ(averaged, 4);
          break;
        default: break;
      }
    }
  }
  EXPECT_TRUE(sawOverlap);
  EXPECT_TRUE(sawBroadcast);
}

TEST_F(IterationPageTest, ModeSwitchRunsDdpAndBackWithTheSameControls) {
  start(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 8));
  EXPECT_FALSE(page_->showingDdp());
  page_->setStrategy(dpv::StrategyKind::DistributedDataParallel);
  ASSERT_TRUE(waitUntil([&] { return engine_->hasIteration() && engine_->info().ddp && !engine_->busy(); }));
  EXPECT_TRUE(page_->showingDdp());
  EXPECT_EQ(engine_->info().plan.front().kind, dpv::StageKind::Construct);
  ASSERT_TRUE(stepTo(0));
  ASSERT_TRUE(stepTo(1));
  page_->stepBack();
  EXPECT_EQ(page_->cursor(), 0);
  EXPECT_EQ(page_->ddpScene()->state().kind, dpv::StageKind::Construct);
  page_->setStrategy(dpv::StrategyKind::DataParallel);
  ASSERT_TRUE(waitUntil([&] { return engine_->hasIteration() && !engine_->info().ddp && !engine_->busy(); }));
  EXPECT_FALSE(page_->showingDdp());
  EXPECT_EQ(engine_->info().plan.front().kind, dpv::StageKind::Scatter);
  EXPECT_EQ(page_->codeView()->tabText(1).toStdString(), "DataParallel.forward");
}

TEST(DdpTimeline, OverlapCountsOnlyAllReduceTimeDuringTheSameRanksBackward) {
  dpv::StageEvent back;
  back.stage = {dpv::StageKind::Backward, 1, "Backward 1"};
  back.devices.resize(2);
  back.devices[0].device = 0;
  back.devices[0].busy_start = 1.0;
  back.devices[0].busy_end = 2.0;
  back.devices[1].device = 1;
  back.devices[1].busy_start = 5.0;
  back.devices[1].busy_end = 6.0;
  dpv::StageEvent fin;
  fin.stage = {dpv::StageKind::Finalize, -1, "Finalize"};
  fin.comm.push_back(dpv::CommSpan{0, 0, 1.2, 1.5, 2.5, 8, {}, {}, {}});  // 0.5 s inside rank 0's backward
  fin.comm.push_back(dpv::CommSpan{1, 0, 1.2, 1.5, 2.5, 8, {}, {}, {}});  // rank 1 was not computing then
  double comm = 0;
  EXPECT_DOUBLE_EQ(ddpOverlapSeconds({back, fin}, &comm), 0.5);
  EXPECT_DOUBLE_EQ(comm, 2.0);
}

TEST_F(IterationPageTest, TimelineDrawsACommunicationLaneUnderEachRanksComputeLane) {
  AppSettings s = settingsFor(QStringLiteral("cpu:2"), QStringLiteral("mlp-bn"), 8);
  s.strategy = dpv::StrategyKind::DistributedDataParallel;
  start(s);
  TimelinePage timeline(context_.get());
  int completed = 0;
  QObject::connect(engine_.get(), &EngineController::iterationCompleted, &timeline, [&] { ++completed; });
  engine_->requestIteration();
  ASSERT_TRUE(waitUntil([&] { return completed == 1 && !engine_->busy(); }));
  timeline.refresh();
  const dpv::TraceLanes& lanes = timeline.ddpLanes();
  ASSERT_EQ(lanes.lanes.size(), 5u);  // host, then per rank: compute, communication
  EXPECT_EQ(lanes.lanes[2].thread, lanes.lanes[1].thread + " communication");
  EXPECT_EQ(lanes.lanes[4].thread, lanes.lanes[3].thread + " communication");
  // One all-reduce bar per rank per bucket, on that rank's communication lane.
  int allreduces = 0;
  for (const auto& bar : timeline.bars()) {
    if (!bar.text.startsWith(QLatin1String("all-reduce bucket"))) continue;
    ++allreduces;
    EXPECT_TRUE(bar.row == 2 || bar.row == 4) << bar.row;
  }
  int spans = 0;
  for (const auto& ev : engine_->lastCompleted()) spans += static_cast<int>(ev.comm.size());
  EXPECT_EQ(spans, 2);  // iteration 1: one bucket on each of the 2 ranks
  EXPECT_EQ(allreduces, spans);
  EXPECT_TRUE(timeline.summary().contains(QLatin1String("DistributedDataParallel")));
}

}  // namespace gui
