// File > Open trace on the Timeline page reads and parses the trace on a thread of its own: the
// window's event loop keeps running while a big trace loads, "Cancel loading" stops the parse and
// leaves the trace shown before, and a trace of 100,000 lanes draws its first lanes with a notice
// instead of a blank chart.
#include <gtest/gtest.h>

#include <QFile>
#include <QTemporaryDir>
#include <QTimer>
#include <atomic>
#include <string>

#include "engine/error.h"
#include "engine/io/trace_lanes.h"
#include "gui/common/context.h"
#include "gui/timeline/page.h"
#include "timeline_test_support.h"

namespace gui {
namespace {

// A Chrome trace of `lanes` lanes (a thread each, in processes of 8 threads), `spansPerLane` spans each.
std::string generatedTrace(int lanes, int spansPerLane) {
  std::string out = "{\"traceEvents\":[\n";
  out.reserve(static_cast<size_t>(lanes) * static_cast<size_t>(spansPerLane) * 110 + 64);
  bool first = true;
  for (int l = 0; l < lanes; ++l) {
    for (int s = 0; s < spansPerLane; ++s) {
      if (!first) out += ",\n";
      first = false;
      out += "{\"name\":\"Forward " + std::to_string(s) + "\",\"cat\":\"forward\",\"ph\":\"X\",\"pid\":" + std::to_string(l / 8) +
             ",\"tid\":" + std::to_string(l % 8) + ",\"ts\":" + std::to_string(s * 10) + ",\"dur\":8,\"args\":{\"step\":" +
             std::to_string(s) + "}}";
    }
  }
  return out + "\n]}\n";
}

class TimelineTraceLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    context_ = std::make_unique<AppContext>();
    page_ = std::make_unique<TimelinePage>(context_.get());  // no engine: only opened traces
    page_->resize(1000, 560);
    page_->show();
  }
  QString write(const QString& name, const std::string& text) {
    const QString path = dir_.filePath(name);
    QFile f(path);
    EXPECT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(text.data(), static_cast<qint64>(text.size()));
    return path;
  }
  // About 45 MB: seconds to parse, so the load is still running while the test looks.
  QString bigTrace() { return write(QStringLiteral("big.json"), generatedTrace(16, 25000)); }
  QTemporaryDir dir_;
  std::unique_ptr<AppContext> context_;
  std::unique_ptr<TimelinePage> page_;
};

TEST_F(TimelineTraceLoadTest, TheEventLoopKeepsRunningWhileABigTraceLoads) {
  const QString big = bigTrace();
  int ticksWhileLoading = 0;
  QTimer timer;
  QObject::connect(&timer, &QTimer::timeout, [&] { ticksWhileLoading += page_->loadingTrace() ? 1 : 0; });
  timer.start(20);
  bool started = false;
  const TraceLoadResult r = waitForTraceLoad(page_.get(), [&] {
    started = page_->openTrace(big);
    // openTrace returns at once: the read has only begun.
    EXPECT_TRUE(page_->loadingTrace());
    EXPECT_TRUE(page_->traceStatus().contains(QLatin1String("Reading the trace big.json"))) << page_->traceStatus().toStdString();
    EXPECT_FALSE(page_->openTrace(big)) << "one load at a time";
  });
  timer.stop();
  ASSERT_TRUE(started);
  ASSERT_TRUE(r.shown()) << r.error.toStdString();
  EXPECT_GE(ticksWhileLoading, 2) << "the GUI thread's timer must fire while the trace is parsed elsewhere";
  EXPECT_EQ(page_->laneCount(), 16);
  EXPECT_TRUE(page_->traceStatus().isEmpty()) << "the notice goes once the trace is shown";
  EXPECT_EQ(page_->bars().size(), TimelinePage::kMaxDrawnSpans) << "bars past the cap are not drawn";
  EXPECT_TRUE(page_->drawCapText().contains(QStringLiteral("Showing the first %1 of 400000 spans").arg(TimelinePage::kMaxDrawnSpans)))
      << page_->drawCapText().toStdString();
}

TEST_F(TimelineTraceLoadTest, CancelStopsTheLoadAndKeepsThePreviousTrace) {
  const QString small = write(QStringLiteral("small.json"), generatedTrace(2, 3));
  ASSERT_EQ(openTraceAndWait(page_.get(), small), QString());
  ASSERT_EQ(page_->laneCount(), 2);
  const QString big = bigTrace();
  const TraceLoadResult r = waitForTraceLoad(page_.get(), [&] {
    ASSERT_TRUE(page_->openTrace(big));
    page_->cancelTraceLoad();
  });
  ASSERT_TRUE(r.ended) << "Cancel must end the load";
  EXPECT_EQ(r.end, TimelinePage::TraceLoadEnd::Cancelled);
  EXPECT_FALSE(page_->loadingTrace());
  EXPECT_TRUE(page_->showingOpenedTrace());
  EXPECT_EQ(page_->laneCount(), 2) << "the trace shown before stays";
  EXPECT_EQ(page_->bars().size(), 6);
  EXPECT_TRUE(page_->traceStatus().contains(QLatin1String("cancelled"))) << page_->traceStatus().toStdString();
  // And the page loads again afterwards.
  EXPECT_EQ(openTraceAndWait(page_.get(), small), QString());
}

TEST_F(TimelineTraceLoadTest, AHundredThousandLanesDrawTheFirstLanesWithANotice) {
  const QString wide = write(QStringLiteral("wide.json"), generatedTrace(100000, 1));
  ASSERT_EQ(openTraceAndWait(page_.get(), wide), QString());
  EXPECT_EQ(page_->laneCount(), 100000);
  EXPECT_EQ(page_->bars().size(), TimelinePage::kMaxDrawnLanes) << "one span on each drawn lane";
  EXPECT_TRUE(page_->plotScroll()->isVisible()) << "never a blank chart";
  EXPECT_TRUE(page_->drawCapText().contains(QStringLiteral("Showing the first %1 of 100000 lanes").arg(TimelinePage::kMaxDrawnLanes)))
      << page_->drawCapText().toStdString();
  // A trace small enough to draw whole says nothing of a cap.
  ASSERT_EQ(openTraceAndWait(page_.get(), write(QStringLiteral("two.json"), generatedTrace(2, 1))), QString());
  EXPECT_TRUE(page_->drawCapText().isEmpty()) << page_->drawCapText().toStdString();
}

TEST_F(TimelineTraceLoadTest, AFailedLoadIsABannerAndKeepsThePreviousTrace) {
  ASSERT_EQ(openTraceAndWait(page_.get(), write(QStringLiteral("ok.json"), generatedTrace(3, 1))), QString());
  const QString error = openTraceAndWait(page_.get(), write(QStringLiteral("bad.json"), "{\"traceEvents\": 3}"));
  EXPECT_TRUE(error.contains(QLatin1String("is not a Chrome trace"))) << error.toStdString();
  EXPECT_TRUE(page_->traceStatus().contains(QLatin1String("cannot be shown"))) << page_->traceStatus().toStdString();
  EXPECT_EQ(page_->laneCount(), 3);
}

// The engine's hook: a cancel that says yes stops the read with an error, one that says no changes nothing.
TEST(TraceLanesCancel, TheHookStopsTheReadOrChangesNothing) {
  const std::string text = generatedTrace(4, 3000);
  int asked = 0;
  EXPECT_THROW(dpv::read_trace_lanes(text, "t.json", [&] { return ++asked > 0; }), dpv::Error);
  EXPECT_EQ(asked, 1) << "asked every few thousand objects, and the first yes ends it";
  const dpv::TraceLanes plain = dpv::read_trace_lanes(text, "t.json");
  const dpv::TraceLanes asking = dpv::read_trace_lanes(text, "t.json", [] { return false; });
  EXPECT_EQ(asking.lanes.size(), plain.lanes.size());
  EXPECT_EQ(asking.spans.size(), plain.spans.size());
  EXPECT_EQ(plain.spans.size(), 12000u);
}

}  // namespace
}  // namespace gui
