// The Iteration page driven through whole iterations on simulated devices, checked against the
// engine's own StageEvents at every stage.
#include "gui_test_support.h"

#include <QTemporaryDir>

#include "engine/data_parallel.h"
#include "gui/common/code_view.h"
#include "gui/common/lesson_panel.h"
#include "gui/iteration/loss_strip.h"
#include "gui/iteration/tensor_inspector.h"

namespace gui {

namespace {

// Per device: chunk rows, replica, idle, and the chip roles the scene shows.
struct DeviceSnapshot {
  qint64 rows;
  bool replica;
  bool idle;
  QStringList chips;
  bool operator==(const DeviceSnapshot&) const = default;
};

QList<DeviceSnapshot> sceneSnapshot(IterationScene* scene) {
  QList<DeviceSnapshot> out;
  for (int d = 0; d < scene->deviceCount(); ++d) {
    QStringList chips;
    for (ChipItem* chip : scene->chipsOn(d)) chips << QLatin1String(dpv::tensor_role_name(chip->view().role)) + QLatin1Char('=') + chip->view().text;
    const DeviceView& v = scene->deviceBox(d)->view();
    out.append(DeviceSnapshot{v.chunkRows, v.hasReplica, v.idle, chips});
  }
  return out;
}

}  // namespace

TEST_F(IterationPageTest, WholeIterationOnFourDevicesMatchesTheEngineAtEveryStage) {
  start(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10));
  const IterationInfo info = engine_->info();
  ASSERT_EQ(info.deviceLabels.size(), 4);
  ASSERT_EQ(info.chunks, (std::vector<int64_t>{3, 3, 3, 1})) << "torch.chunk(10, 4) is 3,3,3,1";
  EXPECT_EQ(page_->scene()->deviceCount(), 4);
  const int stages = static_cast<int>(info.plan.size());
  ASSERT_GT(stages, 5);

  bool sawReduce = false;
  for (int i = 0; i < stages; ++i) {
    ASSERT_TRUE(stepTo(i)) << "stage " << i << " never shown";
    ASSERT_TRUE(page_->errorText().isEmpty()) << page_->errorText().toStdString();
    const dpv::StageEvent& ev = engine_->events().at(i);
    EXPECT_EQ(ev.index, i);
    for (const auto& ds : ev.devices) {
      DeviceBox* box = page_->scene()->deviceBox(ds.device);
      ASSERT_NE(box, nullptr);
      EXPECT_EQ(box->view().chunkRows, ds.chunk_rows) << "stage " << i << " device " << ds.device;
      EXPECT_EQ(box->view().hasReplica, ds.has_replica) << "stage " << i << " device " << ds.device;
      EXPECT_EQ(box->view().memoryBytes, ds.memory_bytes);
      // Every role the engine lists on a device is drawn there as a chip.
      const std::set<dpv::TensorRole> shown = sceneRoles(page_->scene(), ds.device);
      for (dpv::TensorRole role : snapshotRoles(ds)) {
        EXPECT_TRUE(shown.count(role)) << "stage " << i << " device " << ds.device << " lacks a " << dpv::tensor_role_name(role) << " chip";
      }
      // And no gradient chip is drawn where the engine holds no gradient.
      EXPECT_EQ(shown.count(dpv::TensorRole::Grad), snapshotRoles(ds).count(dpv::TensorRole::Grad))
          << "stage " << i << " device " << ds.device;
    }
    // The code line for the stage is highlighted in DataParallel's code.
    const QString line = page_->codeView()->lineText(1, page_->codeView()->highlightedLine(1));
    switch (ev.stage.kind) {
      case dpv::StageKind::Scatter:
        EXPECT_TRUE(line.contains(QLatin1String("self.scatter"))) << line.toStdString();
        for (int d = 0; d < 4; ++d) { EXPECT_EQ(page_->scene()->deviceBox(d)->view().chunkRows, info.chunks[d]); }
        break;
      case dpv::StageKind::Replicate:
        EXPECT_TRUE(line.contains(QLatin1String("self.replicate")));
        for (int d = 0; d < 4; ++d) { EXPECT_TRUE(page_->scene()->deviceBox(d)->view().hasReplica) << "device " << d; }
        break;
      case dpv::StageKind::Forward: EXPECT_TRUE(line.contains(QLatin1String("parallel_apply"))); break;
      case dpv::StageKind::Gather: EXPECT_TRUE(line.contains(QLatin1String("self.gather"))); break;
      case dpv::StageKind::ReduceGrads: {
        sawReduce = true;
        // Gradients end on device 0 (the original module's .grad).
        EXPECT_TRUE(sceneRoles(page_->scene(), 0).count(dpv::TensorRole::Grad));
        break;
      }
      default: break;
    }
  }
  EXPECT_TRUE(sawReduce);
  EXPECT_TRUE(page_->atEnd());
  EXPECT_EQ(engine_->lastCompleted().size(), stages);
}

TEST_F(IterationPageTest, SixSamplesOnFourDevicesLeaveDeviceThreeIdle) {
  start(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 6));
  EXPECT_EQ(engine_->info().chunks, (std::vector<int64_t>{2, 2, 2}));
  ASSERT_TRUE(stepTo(0));
  EXPECT_EQ(engine_->events().at(0).stage.kind, dpv::StageKind::Scatter);
  for (int d = 0; d < 3; ++d) {
    EXPECT_FALSE(page_->scene()->deviceBox(d)->isIdle()) << d;
    EXPECT_EQ(page_->scene()->deviceBox(d)->view().chunkRows, 2);
  }
  EXPECT_TRUE(page_->scene()->deviceBox(3)->isIdle());
  EXPECT_TRUE(page_->scene()->chipsOn(3).isEmpty());
  // Still idle (no replica) after Replicate.
  ASSERT_TRUE(stepTo(1));
  EXPECT_TRUE(page_->scene()->deviceBox(3)->isIdle());
  EXPECT_FALSE(page_->scene()->deviceBox(3)->view().hasReplica);
}

TEST_F(IterationPageTest, StepBackShowsTheRecordedStageAgainWithoutRunningIt) {
  start(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 12));
  QList<QList<DeviceSnapshot>> seen;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(stepTo(i));
    seen.append(sceneSnapshot(page_->scene()));
  }
  const int recorded = static_cast<int>(engine_->events().size());
  page_->stepBack();
  page_->stepBack();
  EXPECT_EQ(page_->cursor(), 2);
  EXPECT_EQ(sceneSnapshot(page_->scene()), seen[2]);
  ASSERT_TRUE(stepTo(3));
  EXPECT_EQ(sceneSnapshot(page_->scene()), seen[3]);
  EXPECT_EQ(static_cast<int>(engine_->events().size()), recorded) << "replaying must not run stages again";
  page_->restart();
  EXPECT_EQ(page_->cursor(), -1);
  // Before the first stage only GPU 0 holds something: the batch (`.cuda()`) and the module.
  EXPECT_EQ(sceneRoles(page_->scene(), 0), (std::set<dpv::TensorRole>{dpv::TensorRole::Input, dpv::TensorRole::Param}));
  for (int d = 1; d < page_->scene()->deviceCount(); ++d) { EXPECT_TRUE(page_->scene()->chipsOn(d).isEmpty()); }
  ASSERT_TRUE(stepTo(0));
  EXPECT_EQ(sceneSnapshot(page_->scene()), seen[0]);
}

TEST_F(IterationPageTest, PlayAnimatesToTheEndOfTheIterationAndStops) {
  start(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10));
  page_->setSpeed(4.0);  // real animations, short
  page_->play();
  EXPECT_TRUE(page_->playing());
  ASSERT_TRUE(waitUntil([&] { return page_->atEnd() && !page_->playing(); }, 60000));
  EXPECT_EQ(engine_->events().size(), static_cast<int>(engine_->info().plan.size()));
  EXPECT_FALSE(page_->scene()->animating());
  EXPECT_TRUE(page_->errorText().isEmpty());
}

TEST_F(IterationPageTest, ChangingTheDeviceCountMidIterationStartsCleanly) {
  start(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10));
  ASSERT_TRUE(stepTo(0));
  ASSERT_TRUE(stepTo(1));
  page_->stepForward();  // a request in flight while the settings change
  context_->setSettings(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 10));
  // The new run steps back to the stage shown (stage 1; the step in flight belonged to the old settings).
  ASSERT_TRUE(waitUntil([&] {
    return page_->scene()->deviceCount() == 2 && engine_->hasIteration() && !engine_->busy() && !page_->waitingForEngine() &&
           page_->cursor() == 1;
  }));
  EXPECT_EQ(engine_->info().chunks, (std::vector<int64_t>{5, 5}));
  const int stages = static_cast<int>(engine_->info().plan.size());
  for (int i = 2; i < stages; ++i) { ASSERT_TRUE(stepTo(i)) << i; }
  EXPECT_TRUE(page_->errorText().isEmpty()) << page_->errorText().toStdString();
  EXPECT_EQ(engine_->events().size(), stages);
  for (const auto& ev : engine_->events()) { EXPECT_LE(ev.devices.size(), 2u) << "an event of the old settings leaked in"; }
}

TEST_F(IterationPageTest, OneSampleChunkWithBatchNormIsShownAsAnErrorNotThrown) {
  // torch.chunk(10, 4) = 3,3,3,1: replica 3 gets one sample, and BatchNorm refuses it in training.
  // (A batch of 9 would give 3,3,3: three replicas and no one-sample chunk.)
  EXPECT_EQ(dpv::chunk_sizes(9, 4), (std::vector<int64_t>{3, 3, 3}));
  start(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 10));
  const int stages = static_cast<int>(engine_->info().plan.size());
  for (int i = 0; i < stages && page_->errorText().isEmpty(); ++i) { ASSERT_TRUE(stepTo(i)); }
  const QString error = page_->errorText();
  ASSERT_FALSE(error.isEmpty()) << "the one-sample chunk did not fail";
  EXPECT_TRUE(error.contains(QLatin1String("Expected more than 1 value per channel when training"))) << error.toStdString();
  EXPECT_TRUE(error.contains(QLatin1String("PyTorch raises the same"))) << "raised inside the program's forward";
  // nn.DataParallel has no synchronised BatchNorm: the banner must not send the learner to one.
  EXPECT_FALSE(error.contains(QLatin1String("SyncBatchNorm"))) << error.toStdString();
  EXPECT_FALSE(page_->scene()->deviceBox(3)->failure().isEmpty()) << "device 3 should be marked";
  // The page decides on the typed reason and site the engine sent, not on the message's words.
  EXPECT_EQ(engine_->lastFailure().reason, dpv::ErrorReason::BatchNormSingleValue);
  EXPECT_EQ(engine_->lastFailure().site.replica, 3);
  EXPECT_TRUE(engine_->lastFailure().inProgram);
  for (int d = 0; d < 3; ++d) { EXPECT_TRUE(page_->scene()->deviceBox(d)->failure().isEmpty()) << d; }
  EXPECT_TRUE(engine_->running());
  // The app carries on: SyncBatchNorm accepts the one-sample chunk.
  const int failedAt = page_->cursor();  // the learner's place: the new run steps back to it
  context_->setSettings(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 10, true));
  ASSERT_TRUE(waitUntil([&] { return engine_->hasIteration() && !engine_->busy() && !page_->waitingForEngine() && page_->cursor() == failedAt; }));
  EXPECT_TRUE(page_->errorText().isEmpty());
  for (int i = failedAt + 1; i < failedAt + 4; ++i) { ASSERT_TRUE(stepTo(i)); }
  EXPECT_TRUE(page_->errorText().isEmpty()) << page_->errorText().toStdString();
}

TEST_F(IterationPageTest, AnErrorOfTheAppIsNotPresentedAsPyTorchs) {
  // Preparing the iteration (devices, model, data) is the app's work: its errors are the app's.
  start(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 8));
  context_->setSettings(settingsFor(QStringLiteral("cpu:0"), QStringLiteral("simple"), 8));
  ASSERT_TRUE(waitUntil([&] { return !engine_->busy() && !page_->errorText().isEmpty(); }));
  const QString error = page_->errorText();
  EXPECT_FALSE(error.contains(QLatin1String("PyTorch raises the same"))) << error.toStdString();
  EXPECT_TRUE(error.contains(QLatin1String("the app's own"))) << error.toStdString();
  EXPECT_FALSE(engine_->lastErrorInProgram());
}

TEST_F(IterationPageTest, WholeBatchBatchNormIsLabelledAsWhatDdpAndSyncBatchNormCompute) {
  start(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 16, true));
  const auto& plan = engine_->info().plan;
  int bnForward = -1;
  for (int i = 0; i < static_cast<int>(plan.size()) && bnForward < 0; ++i) {
    if (plan[static_cast<size_t>(i)].kind == dpv::StageKind::Forward && plan[static_cast<size_t>(i)].layer == 1) bnForward = i;
  }
  ASSERT_GE(bnForward, 0);
  for (int i = 0; i <= bnForward; ++i) { ASSERT_TRUE(stepTo(i)) << i; }
  for (int d = 0; d < 4; ++d) {
    const QString note = page_->scene()->deviceBox(d)->view().note;
    EXPECT_TRUE(note.contains(QLatin1String("as DDP + SyncBatchNorm"))) << d << ": " << note.toStdString();
    EXPECT_FALSE(note.contains(QLatin1String("var[0]"))) << "per-device statistics are not the ones used: " << note.toStdString();
  }
}

TEST_F(IterationPageTest, TheLossStripShowsEveryIterationsLossFromTheEngine) {
  AppSettings settings = settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10);
  settings.learningRate = 0.5;
  start(settings);
  EXPECT_TRUE(page_->lossStrip()->points().isEmpty());
  const int stages = static_cast<int>(engine_->info().plan.size());
  for (int iteration = 1; iteration <= 3; ++iteration) {
    for (int i = 0; i < stages; ++i) {
      page_->stepForward();
      ASSERT_TRUE(waitUntil([&] { return !page_->waitingForEngine() && engine_->iterationComplete() == (i == stages - 1); }))
          << "iteration " << iteration << " stage " << i;
    }
    ASSERT_EQ(engine_->losses().size(), iteration);
  }
  const QVector<QPointF> points = page_->lossStrip()->points();
  ASSERT_EQ(points.size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(points[i].x(), i + 1);
    EXPECT_EQ(points[i].y(), engine_->losses()[i]) << "the engine's loss.item(), not a recomputation";
  }
  EXPECT_LT(points[2].y(), points[0].y()) << "the same batch each iteration: the loss falls";
  EXPECT_TRUE(page_->lossStrip()->caption().contains(QStringLiteral("iteration 3: "))) << page_->lossStrip()->caption().toStdString();
  context_->setSettings(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 10));
  // The new run steps back to the stage shown (past its Loss stage): its own first loss only.
  ASSERT_TRUE(waitUntil([&] { return engine_->hasIteration() && !engine_->busy() && !page_->waitingForEngine(); }));
  ASSERT_LE(page_->lossStrip()->points().size(), 1) << "new settings start a new run";
  ASSERT_EQ(page_->lossStrip()->points().size(), engine_->losses().size());
  if (!engine_->losses().isEmpty()) { EXPECT_EQ(page_->lossStrip()->points()[0], QPointF(1, engine_->losses()[0])); }
}

TEST_F(IterationPageTest, ClickingAChipOpensItInTheInspector) {
  start(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 8));
  ASSERT_TRUE(stepTo(0));
  ASSERT_TRUE(page_->inspectChip(1, dpv::TensorRole::Input));
  EXPECT_TRUE(page_->inspector()->headline().contains(QLatin1String("GPU 1"))) << page_->inspector()->headline().toStdString();
  const auto& ds = engine_->events().at(0).devices.at(1);
  int inputs = 0;
  for (const auto& t : ds.tensors) inputs += t.memory == dpv::MemoryKind::Batch;
  ASSERT_EQ(inputs, 1);
  EXPECT_EQ(page_->inspector()->rowCount(), inputs);
  EXPECT_EQ(page_->inspector()->rowText(0, 1), QStringLiteral("[4, 10]"));
}

TEST_F(IterationPageTest, AMissingLessonFileIsSaidPlainlyAndTheRestWorks) {
  QTemporaryDir empty;
  qputenv("DPVIZ_LESSONS", empty.path().toUtf8());
  start(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 8));
  ASSERT_TRUE(stepTo(0));
  qunsetenv("DPVIZ_LESSONS");
  EXPECT_TRUE(page_->lessonPanel()->lessonMissing());
  EXPECT_TRUE(page_->lessonPanel()->lastMarkdown().contains(QLatin1String("missing")));
  EXPECT_TRUE(page_->lessonPanel()->lastMarkdown().contains(QLatin1String("chunk sizes: [4, 4]")));
  ASSERT_TRUE(stepTo(1));
}

TEST(CodeMapping, EveryStageKindHasALineInBothTabs) {
  using K = dpv::StageKind;
  const auto user = userCodeLines(QStringLiteral("mlp-bn"), false, 10, 0.01, QStringLiteral("cpu:4"));
  const auto dp = dataParallelCodeLines();
  for (K kind : {K::Scatter, K::Replicate, K::Forward, K::Gather, K::Loss, K::GradScatter, K::Backward, K::ReduceGrads, K::Step}) {
    auto has = [kind](const QVector<CodeLine>& lines) {
      return std::any_of(lines.begin(), lines.end(), [kind](const CodeLine& l) { return l.stages.contains(kind); });
    };
    EXPECT_TRUE(has(user)) << stageLessonId(kind).toStdString();
    EXPECT_TRUE(has(dp)) << stageLessonId(kind).toStdString();
  }
  int bnLines = 0;
  for (const auto& l : user) bnLines += l.text.contains(QLatin1String("BatchNorm1d"));
  EXPECT_GE(bnLines, 1);
  const auto sync = userCodeLines(QStringLiteral("mlp-bn"), true, 10, 0.01, QStringLiteral("cpu:4"));
  // SyncBatchNorm mode shows the DDP code that computes its statistics, never nn.SyncBatchNorm
  // inside nn.DataParallel (which does not sync).
  auto hasText = [&sync](const char* text) {
    return std::any_of(sync.begin(), sync.end(), [text](const CodeLine& l) { return l.text.contains(QLatin1String(text)); });
  };
  EXPECT_TRUE(hasText("convert_sync_batchnorm"));
  EXPECT_TRUE(hasText("DistributedDataParallel"));
  EXPECT_FALSE(hasText("nn.SyncBatchNorm("));
}

}  // namespace gui
