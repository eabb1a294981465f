// The lesson panel renders the stage lessons with the run's facts (IterationInfo::lessonFacts,
// filled by the engine worker): the Reduce lesson names BatchNorm as the reason the sum differs
// only for a model with BatchNorm, DDP's buffer lesson says the first forward broadcasts too, and a
// lesson template that does not render is said plainly while the numbers stay.
#include "gui_test_support.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>

#include "gui/common/lesson_panel.h"

namespace gui {
namespace {

// The index of the first stage of `kind` in the engine's plan, or -1.
int stageIndex(const EngineController& engine, dpv::StageKind kind) {
  const auto& plan = engine.info().plan;
  for (int i = 0; i < static_cast<int>(plan.size()); ++i)
    if (plan[static_cast<size_t>(i)].kind == kind) return i;
  return -1;
}

class LessonFactsPanelTest : public IterationPageTest {
 protected:
  // Steps to the first stage of `kind` and returns the panel's Markdown.
  QString lessonAt(dpv::StageKind kind) {
    const int target = stageIndex(*engine_, kind);
    EXPECT_GE(target, 0);
    for (int i = page_->cursor() + 1; i <= target; ++i)
      if (!stepTo(i)) return QStringLiteral("<stage %1 never ran>").arg(i);
    return page_->lessonPanel()->lastMarkdown();
  }
};

TEST_F(LessonFactsPanelTest, WithBatchNormTheReduceLessonSaysWhyTheSumDiffers) {
  start(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("mlp-bn"), 8));
  ASSERT_TRUE(engine_->info().lessonFacts.bn_breaks_sum);
  const QString bn = lessonAt(dpv::StageKind::ReduceGrads);
  EXPECT_TRUE(bn.contains(QLatin1String("**Not in this run:** mlp-bn has BatchNorm"))) << bn.toStdString();
  EXPECT_FALSE(bn.contains(QLatin1String("Adding them gives exactly the gradient"))) << bn.toStdString();
}

TEST_F(LessonFactsPanelTest, WithoutBatchNormTheReduceLessonSaysTheSumIsOneDevicesGradient) {
  start(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 8));
  ASSERT_FALSE(engine_->info().lessonFacts.bn_breaks_sum);
  const QString plain = lessonAt(dpv::StageKind::ReduceGrads);
  EXPECT_FALSE(plain.contains(QLatin1String("BatchNorm"))) << plain.toStdString();
  EXPECT_TRUE(plain.contains(QLatin1String("Adding them gives exactly the gradient"))) << plain.toStdString();
}

TEST_F(LessonFactsPanelTest, TheFirstDdpForwardBroadcastsBuffersAndTheLossIsRankZeros) {
  AppSettings s = settingsFor(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 10);
  s.strategy = dpv::StrategyKind::DistributedDataParallel;
  start(s);
  const dpv::course::LessonFacts& facts = engine_->info().lessonFacts;
  ASSERT_TRUE(facts.ddp);
  EXPECT_EQ(facts.iteration, 1);
  EXPECT_EQ(facts.padded_total, 12);
  EXPECT_EQ(facts.repeated, 2);
  const QString sample = lessonAt(dpv::StageKind::Sample);
  EXPECT_TRUE(sample.contains(QLatin1String("is padded to 12"))) << sample.toStdString();
  const QString buffers = lessonAt(dpv::StageKind::BroadcastBuffers);
  EXPECT_TRUE(buffers.contains(QLatin1String("before the first forward too"))) << buffers.toStdString();
  EXPECT_FALSE(buffers.contains(QLatin1String("after the first"))) << buffers.toStdString();
  const QString loss = lessonAt(dpv::StageKind::Loss);
  EXPECT_TRUE(loss.contains(QLatin1String("is rank 0's: the mean over its 3 samples"))) << loss.toStdString();
}

TEST_F(LessonFactsPanelTest, ALessonThatDoesNotRenderIsSaidPlainlyAndTheNumbersStay) {
  QTemporaryDir lessons;
  ASSERT_TRUE(QDir(lessons.path()).mkpath(QStringLiteral("stages")));
  QFile scatter(lessons.path() + QStringLiteral("/stages/scatter.md"));
  ASSERT_TRUE(scatter.open(QIODevice::WriteOnly));
  scatter.write("# Scatter\n\nA batch of {{batches}} rows.\n");
  scatter.close();
  QFile intro(lessons.path() + QStringLiteral("/intro.md"));  // what makes the folder a lessons folder
  ASSERT_TRUE(intro.open(QIODevice::WriteOnly));
  intro.write("# Intro\n");
  intro.close();
  qputenv("DPVIZ_LESSONS", lessons.path().toUtf8());
  start(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 8));
  ASSERT_TRUE(stepTo(0));
  qunsetenv("DPVIZ_LESSONS");
  const QString md = page_->lessonPanel()->lastMarkdown();
  EXPECT_TRUE(page_->lessonPanel()->lessonMissing());
  EXPECT_TRUE(md.contains(QLatin1String("cannot be shown"))) << md.toStdString();
  EXPECT_TRUE(md.contains(QLatin1String("unknown fact 'batches'"))) << md.toStdString();
  EXPECT_FALSE(md.contains(QLatin1String("A batch of"))) << md.toStdString();
  EXPECT_TRUE(md.contains(QLatin1String("chunk sizes: [4, 4]"))) << md.toStdString();
}

}  // namespace
}  // namespace gui
