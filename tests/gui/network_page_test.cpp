// The Network page (gui/network): a real simulated point on a tiny model shows the engine's own
// figures and says it is simulated, the timeline has each rank's backward and bucket bars with the
// model's ghosts beside them, "predict first" grades the guess with the course's grading, the real
// link's command follows the controls, and a failing run shows the engine's error.
#include <gtest/gtest.h>

#include <QPushButton>

#include "course/network_guess.h"
#include "engine/error.h"
#include "gui/common/context.h"
#include "gui/network/page.h"
#include "gui/network/timeline_chart.h"
#include "gui_test_support.h"

namespace gui {
namespace {

using Kind = NetworkTimelineChart::BarKind;

// The simulated link only, whatever this machine allows (tests/gui/network_real_test.cpp runs the real one).
dpv::course::RealLinkFacts noRealLink() { return {false, "", "", std::nullopt}; }

TEST(NetworkPage, RunsASimulatedPointAndShowsTheEnginesFigures) {
  NetworkPage page(nullptr, nullptr, {}, noRealLink());
  page.resize(1024, 640);
  page.setModel(QStringLiteral("simple"), 2, 25);
  page.setLink(0, 2);  // 10 Mbit/s, 2 ms
  page.setPredictFirst(true, 30);
  page.run();
  ASSERT_TRUE(waitUntil([&] { return !page.running(); }, 120000));
  ASSERT_TRUE(page.errorText().isEmpty()) << page.errorText().toStdString();
  ASSERT_TRUE(page.result());
  const dpv::course::NetworkLabPoint& p = *page.result();
  EXPECT_TRUE(p.simulated);
  EXPECT_TRUE(page.simulatedText().startsWith(QStringLiteral("Simulated link:")));
  EXPECT_TRUE(page.figuresText().contains(QString::number(p.summary.step_s * 1e3, 'f', 1) + QStringLiteral(" ms")));
  EXPECT_TRUE(page.figuresText().contains(QString::number(p.summary.predicted_step_s * 1e3, 'f', 1) + QStringLiteral(" ms")));
  EXPECT_TRUE(page.commandText().contains(QStringLiteral("--rate 10mbit --delay 2ms")));
  EXPECT_FALSE(page.figuresText().contains(QStringLiteral("gradient error"))) << "no hook, no probe";
  // The grade is the course's, for the guess made before the run.
  const std::string expected = dpv::course::guess_grade_text(dpv::course::grade_step_guess(0.030, p.summary));
  EXPECT_EQ(page.gradeText().toStdString(), expected);

  NetworkTimelineChart* chart = page.timeline();
  ASSERT_EQ(chart->rankCount(), 2);
  for (int r = 0; r < 2; ++r) {
    const dpv::netmodel::StepMeasure& m = p.last_step_by_rank[static_cast<size_t>(r)];
    EXPECT_EQ(chart->countBars(r, Kind::Backward), static_cast<int>(m.facts.backward_s.size()));
    EXPECT_EQ(chart->countBars(r, Kind::Bucket), static_cast<int>(m.buckets.size()));
    EXPECT_GE(chart->countBars(r, Kind::Bucket), 1);
    EXPECT_EQ(chart->countBars(r, Kind::GhostBucket), chart->countBars(r, Kind::Bucket));
  }
  // The measured bars are the engine's starts and ends, as they are.
  const dpv::netmodel::MeasuredBucket& first = p.last_step_by_rank[0].buckets[0];
  bool found = false;
  for (const auto& b : chart->bars())
    if (b.rank == 0 && b.kind == Kind::Bucket && b.index == 0) found = b.start == first.start && b.end == first.end;
  EXPECT_TRUE(found);
  EXPECT_FALSE(page.grab().isNull());
}

TEST(NetworkPage, WithoutAGuessNoGradeIsShown) {
  NetworkPage page(nullptr, nullptr, {}, noRealLink());
  page.setModel(QStringLiteral("simple"), 4, 25);
  page.setLink(3, 0);
  page.run();
  ASSERT_TRUE(waitUntil([&] { return !page.running(); }, 120000));
  ASSERT_TRUE(page.result()) << page.errorText().toStdString();
  EXPECT_TRUE(page.gradeText().isEmpty());
  EXPECT_EQ(page.timeline()->rankCount(), 4);
  EXPECT_TRUE(page.commandText().contains(QStringLiteral("--nproc-per-node 2")));
}

TEST(NetworkPage, AFailingRunShowsTheEnginesErrorAndDoesNotThrow) {
  NetworkPage page(nullptr, nullptr, [](const dpv::course::NetworkLabSetup&, const dpv::netmodel::Link&) -> dpv::course::NetworkLabPoint {
    throw dpv::Error("the link broke: try again", dpv::ErrorClass::ValueError);
  }, noRealLink());
  page.run();
  ASSERT_TRUE(waitUntil([&] { return !page.running(); }));
  EXPECT_TRUE(page.errorText().contains(QStringLiteral("the link broke: try again")));
  EXPECT_FALSE(page.result());
  EXPECT_TRUE(page.runButton()->isEnabled());
}

// In the app the lessons below the timeline are written from the shown run's facts.
TEST(NetworkPage, TheLessonsAreWrittenFromTheRun) {
  qputenv("DPVIZ_LESSONS", QByteArray(DPV_LESSONS_SOURCE_DIR));
  AppContext context;
  NetworkPage page(&context, nullptr, {}, noRealLink());
  EXPECT_TRUE(page.lessonsMarkdown().isEmpty());
  page.setModel(QStringLiteral("simple"), 2, 25);
  page.setLink(3, 0);
  page.run();
  ASSERT_TRUE(waitUntil([&] { return !page.running(); }, 120000));
  ASSERT_TRUE(page.result()) << page.errorText().toStdString();
  const QString lessons = page.lessonsMarkdown();
  EXPECT_FALSE(lessons.contains(QStringLiteral("{{")));
  EXPECT_TRUE(lessons.contains(QString::number(page.result()->summary.step_s * 1e3, 'f', 1) + QStringLiteral(" ms")));
  EXPECT_TRUE(lessons.contains(QStringLiteral("Why buckets")));
}

// A hook's run shows the bytes it saved beside the gradient error they cost, from the point's value.
TEST(NetworkPage, AHooksRunShowsItsGradientError) {
  NetworkPage page(nullptr);
  page.setModel(QStringLiteral("simple"), 2, 25);
  page.setLink(3, 0);
  page.setHook(dpv::CommHookKind::Fp16Compress);
  page.run();
  ASSERT_TRUE(waitUntil([&] { return !page.running(); }, 120000));
  ASSERT_TRUE(page.result()) << page.errorText().toStdString();
  const dpv::netmodel::PointSummary& s = page.result()->summary;
  ASSERT_TRUE(s.hook_error.has_value());
  EXPECT_GT(s.hook_error->relative_l2(), 0);
  EXPECT_TRUE(page.figuresText().contains(QStringLiteral("gradient error ") +
                                          QString::number(s.hook_error->relative_l2(), 'e', 1) +
                                          QStringLiteral(" (relative L2 vs. allreduce)")))
      << page.figuresText().toStdString();
  EXPECT_TRUE(page.figuresText().contains(QString::number(s.saved_bytes_per_step / 1e6, 'f', 3) +
                                          QStringLiteral(" MB per step")));
}

TEST(NetworkPage, TheCommandFollowsTheHook) {
  NetworkPage page(nullptr, nullptr, {}, noRealLink());
  page.setHook(dpv::CommHookKind::Fp16Compress);
  EXPECT_TRUE(page.commandText().contains(QStringLiteral("--comm-hook fp16")));
  page.setHook(dpv::CommHookKind::None);
  EXPECT_FALSE(page.commandText().contains(QStringLiteral("--comm-hook")));
}

}  // namespace
}  // namespace gui
