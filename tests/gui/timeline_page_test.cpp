// The Timeline page: its lesson is shown, "Measure" draws each stage's median with its spread from
// several engine-timed iterations, the speed-up against one device is the engine's number, the
// page says when simulated devices share fewer cores, and many devices scroll instead of squeezing.
#include <cmath>
#include <gtest/gtest.h>

#include <QScrollArea>
#include <limits>
#include <qcustomplot.h>

#include "course/timeline_series.h"
#include "gui/common/context.h"
#include "gui/runtime/engine_controller.h"
#include "gui/timeline/page.h"
#include "gui_test_support.h"

namespace gui {
namespace {

class TimelinePageTest : public ::testing::Test {
 protected:
  void start(const AppSettings& settings) {
    context_ = std::make_unique<AppContext>();
    engine_ = std::make_unique<EngineController>();
    context_->setSettings(settings);
    context_->setEngine(engine_.get());
    page_ = std::make_unique<TimelinePage>(context_.get());
    page_->resize(1000, 560);
    page_->show();
  }
  bool measure() {
    bool done = false, ok = false;
    QObject::connect(page_.get(), &TimelinePage::measured, page_.get(), [&](bool result) { done = true; ok = result; });
    page_->measure();
    return waitUntil([&] { return done; }, 60000) && ok;
  }
  void TearDown() override {
    page_.reset();
    engine_.reset();
    context_.reset();
  }
  std::unique_ptr<AppContext> context_;
  std::unique_ptr<EngineController> engine_;
  std::unique_ptr<TimelinePage> page_;
};

TEST_F(TimelinePageTest, ShowsItsLesson) {
  start(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 10));
  EXPECT_TRUE(page_->lessonText().contains(QLatin1String("What to look for"))) << page_->lessonText().left(200).toStdString();
  EXPECT_TRUE(page_->lessonText().contains(QLatin1String("busbw")));
}

TEST_F(TimelinePageTest, MeasuresTheMedianAndSpreadOfSeveralIterations) {
  start(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 10));
  ASSERT_TRUE(measure()) << page_->summary().toStdString();
  ASSERT_TRUE(page_->series().has_value());
  const dpv::course::TimelineSeries& s = *page_->series();
  EXPECT_EQ(static_cast<int>(s.totals.size()), TimelinePage::kMeasuredIterations);
  int stageBars = 0, deviceBars = 0;
  for (const TimelinePage::Bar& bar : page_->bars()) {
    (bar.row == 0 ? stageBars : deviceBars)++;
    ASSERT_GE(bar.lowMs, 0) << "every measured bar has a spread";
    EXPECT_LE(bar.startMs, bar.lowMs + 1e-9);
    EXPECT_LE(bar.lowMs, bar.endMs + 1e-9);
    EXPECT_LE(bar.endMs, bar.highMs + 1e-9);
  }
  EXPECT_EQ(stageBars, static_cast<int>(s.stages.size()));
  EXPECT_GT(deviceBars, stageBars) << "two devices each run the forward and backward layers";
  // The rows: the stages on top, then each device by the name the engine gives it.
  const auto ticker = page_->plot()->yAxis->ticker().dynamicCast<QCPAxisTickerText>();
  ASSERT_TRUE(ticker);
  EXPECT_EQ(ticker->ticks().values(), (QList<QString>{QStringLiteral("GPU 1"), QStringLiteral("GPU 0"), QStringLiteral("stages (wall)")}));
  // The stage bars lie end to end by their medians.
  double expectedEnd = 0;
  for (const auto& stage : s.stages) expectedEnd += stage.span.median * 1e3;
  double lastEnd = 0;
  for (const TimelinePage::Bar& bar : page_->bars())
    if (bar.row == 0) lastEnd = std::max(lastEnd, bar.endMs);
  EXPECT_NEAR(lastEnd, expectedEnd, 1e-9);
  EXPECT_TRUE(page_->summary().contains(QLatin1String("median"))) << page_->summary().toStdString();
  // The speed-up is the engine's number, shown as it is.
  EXPECT_GT(s.speedup, 0);
  EXPECT_TRUE(page_->speedupText().contains(QString::number(s.speedup, 'f', 2))) << page_->speedupText().toStdString();
  // Two simulated devices: beside it, the efficiency against this machine's own limit.
  ASSERT_GT(s.machine_speedup, 0);
  EXPECT_TRUE(page_->speedupText().contains(QStringLiteral("%1% of this machine's limit").arg(std::lround(100 * s.efficiency))))
      << page_->speedupText().toStdString();
}

TEST_F(TimelinePageTest, SaysWhenSimulatedDevicesShareFewerCores) {
  start(settingsFor(QStringLiteral("cpu:8"), QStringLiteral("simple"), 16));
  ASSERT_TRUE(measure()) << page_->summary().toStdString();
  // The cores the engine found free while it timed (all of this process's CPUs on a quiet machine).
  ASSERT_TRUE(page_->series().has_value());
  const unsigned cores = page_->series()->cores_for_devices();
  ASSERT_GT(cores, 0u);
  EXPECT_LE(cores, dpv::course::host_cpu_count());
  if (cores < 8) {
    EXPECT_TRUE(page_->coresNote().contains(QStringLiteral("cannot show a speed-up beyond %1×").arg(cores)))
        << page_->coresNote().toStdString();
  } else {
    EXPECT_FALSE(page_->coresNote().contains(QLatin1String("cannot show"))) << page_->coresNote().toStdString();
  }
}

TEST_F(TimelinePageTest, EightDevicesScrollInsteadOfSqueezingTheRows) {
  start(settingsFor(QStringLiteral("cpu:8"), QStringLiteral("simple"), 16));
  page_->resize(900, 420);
  ASSERT_TRUE(measure());
  ASSERT_NE(page_->plotScroll(), nullptr);
  EXPECT_EQ(page_->plotScroll()->widget(), page_->plot());
  const int rows = 9;  // the stages' row and eight devices
  EXPECT_GE(page_->plot()->minimumHeight(), rows * 18) << "each row keeps a readable height";
  EXPECT_GT(page_->plot()->minimumHeight(), page_->plotScroll()->viewport()->height()) << "the rows scroll at this size";
  // Scrolled to the top, the time axis is still in view: it runs along the top too, same range.
  EXPECT_TRUE(page_->plot()->xAxis2->visible());
  EXPECT_TRUE(page_->plot()->xAxis2->tickLabels());
  EXPECT_EQ(page_->plot()->xAxis2->range(), page_->plot()->xAxis->range());
}

TEST_F(TimelinePageTest, NewSettingsDropAMeasurement) {
  start(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 10));
  ASSERT_TRUE(measure());
  ASSERT_TRUE(page_->series().has_value());
  context_->setSettings(settingsFor(QStringLiteral("cpu:3"), QStringLiteral("simple"), 10));
  EXPECT_FALSE(page_->series().has_value());
  EXPECT_TRUE(page_->speedupText().isEmpty());
}

// Under DDP, "Run one iteration" charts only the iteration's work: it starts at 0 (not at the
// iteration's preparation), DDP's construction is left out and said apart; "Measure" times DDP
// too, and both say whose run they show.
TEST_F(TimelinePageTest, DdpModeChartsOnlyTheIterationsWorkAndMeasuresDdp) {
  AppSettings settings = settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 10);
  settings.strategy = dpv::StrategyKind::DistributedDataParallel;
  start(settings);
  int completed = 0;
  QObject::connect(engine_.get(), &EngineController::iterationCompleted, page_.get(), [&] { ++completed; });
  page_->runIteration();
  ASSERT_TRUE(waitUntil([&] { return completed == 1; }, 60000));
  ASSERT_FALSE(page_->bars().isEmpty());
  double first = std::numeric_limits<double>::infinity(), last = 0;
  for (const TimelinePage::Bar& bar : page_->bars()) {
    EXPECT_NE(bar.stageKind, static_cast<int>(dpv::StageKind::Construct));
    first = std::min(first, bar.startMs);
    last = std::max(last, bar.endMs);
  }
  EXPECT_EQ(first, 0.0);
  EXPECT_LE(page_->plot()->xAxis->range().upper, last * 1.03 + 1e-9);  // the axis ends with the work
  EXPECT_TRUE(page_->summary().contains(QLatin1String("construction"))) << page_->summary().toStdString();
  EXPECT_TRUE(page_->runCaption().contains(QStringLiteral("DistributedDataParallel · cpu:2"))) << page_->runCaption().toStdString();
  EXPECT_TRUE(page_->runCaption().contains(QLatin1String("batch 10")));

  ASSERT_TRUE(measure());
  ASSERT_TRUE(page_->series().has_value());
  EXPECT_EQ(page_->series()->config.run.strategy, dpv::StrategyKind::DistributedDataParallel);
  EXPECT_TRUE(page_->summary().contains(QLatin1String("of DistributedDataParallel"))) << page_->summary().toStdString();
  EXPECT_TRUE(page_->runCaption().contains(QLatin1String("DistributedDataParallel"))) << page_->runCaption().toStdString();
}

}  // namespace
}  // namespace gui
