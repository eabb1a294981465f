// The main window: navigation, pages, the worker stopping on close, the Intro sample, the
// Timeline, trace export and --screenshot-all.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <QFile>
#include <QImage>
#include <QRegularExpression>
#include <QSettings>
#include <QTemporaryDir>
#include <qcustomplot.h>

#include "gui/common/context.h"
#include "gui/app/main_window.h"
#include "gui/app/screenshot_runner.h"
#include "gui/app/settings_bar.h"
#include "gui/intro/page.h"
#include "gui/iteration/page.h"
#include "gui/runtime/engine_controller.h"
#include "gui/timeline/page.h"
#include "engine/io/trace_merge.h"
#include "gui_test_support.h"
#include "timeline_test_support.h"

namespace gui {

namespace {

// A 1280x800 main window (gui_test_support.h).
struct Window : SizedWindow {
  explicit Window(const AppSettings& settings) : SizedWindow(settings, QSize(1280, 800)) {}
};

}  // namespace

TEST(MainWindow, HasEveryPageAndNavigates) {
  Window w(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10));
  for (const QString& id : MainWindow::pageIds()) {
    ASSERT_NE(w.window->page(id), nullptr) << id.toStdString();
    w.window->showPage(id);
    EXPECT_EQ(w.window->currentPageId(), id);
  }
  emit w.context.navigateRequested(QStringLiteral("timeline"));
  EXPECT_EQ(w.window->currentPageId(), QStringLiteral("timeline"));
}

TEST(MainWindow, TheSettingsBarShowsOnlyOnPagesItActsOn) {
  Window w(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10));
  w.window->showPage(QStringLiteral("iteration"));
  EXPECT_TRUE(w.window->settingsBar()->isVisible());
  w.window->showPage(QStringLiteral("bnlab"));  // the lab has its own devices, batch and learning rate
  EXPECT_FALSE(w.window->settingsBar()->isVisible());
  w.window->showPage(QStringLiteral("timeline"));
  EXPECT_TRUE(w.window->settingsBar()->isVisible());
}

TEST(MainWindow, TheWorkerStopsWhenTheWindowClosesMidTraining) {
  Window w(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 64));
  ASSERT_TRUE(waitUntil([&] { return w.engine->hasIteration(); }));
  w.window->showPage(QStringLiteral("iteration"));
  auto* page = qobject_cast<IterationPage*>(w.window->page(QStringLiteral("iteration")));
  ASSERT_NE(page, nullptr);
  page->play();
  w.engine->requestIteration();
  ASSERT_TRUE(waitUntil([&] { return !w.engine->events().isEmpty(); }));
  EXPECT_TRUE(w.engine->running());
  w.window->close();
  EXPECT_FALSE(w.engine->running()) << "the engine thread must end with the window";
  w.engine->requestStage();  // ignored, not a crash
  EXPECT_FALSE(w.engine->busy());
}

TEST(MainWindow, IntroRunsTheSampleProgramOnTheChosenDevices) {
  Window w(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10));
  auto* intro = qobject_cast<IntroPage*>(w.window->page(QStringLiteral("intro")));
  ASSERT_NE(intro, nullptr);
  intro->runSample();
  ASSERT_TRUE(waitUntil([&] { return !intro->sampleRunning(); }));
  const QString out = intro->sampleOutput();
  EXPECT_TRUE(out.contains(QLatin1String("Using 4 GPUs"))) << out.toStdString();
  EXPECT_TRUE(out.contains(QRegularExpression(QStringLiteral("Loss: \\d+\\.\\d{4}\\n")))) << out.toStdString();
  EXPECT_TRUE(out.contains(QLatin1String("[8, 8, 8, 8]"))) << out.toStdString();

  w.context.setSettings(settingsFor(QStringLiteral("cpu:1"), QStringLiteral("simple"), 10));
  intro->runSample();
  ASSERT_TRUE(waitUntil([&] { return !intro->sampleRunning(); }));
  EXPECT_TRUE(intro->sampleOutput().contains(QLatin1String("Using single GPU or CPU"))) << intro->sampleOutput().toStdString();
}

TEST(MainWindow, TimelineChartsTheLastIterationFromTheEngineEvents) {
  Window w(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 32));
  auto* timeline = qobject_cast<TimelinePage*>(w.window->page(QStringLiteral("timeline")));
  ASSERT_NE(timeline, nullptr);
  EXPECT_TRUE(timeline->bars().isEmpty());
  timeline->runIteration();
  ASSERT_TRUE(waitUntil([&] { return !w.engine->lastCompleted().isEmpty(); }));
  const auto& events = w.engine->lastCompleted();
  int stageBars = 0, deviceBars = 0, expectedDeviceBars = 0, collectives = 0;
  for (const auto& b : timeline->bars()) (b.row == 0 ? stageBars : deviceBars)++;
  for (const auto& ev : events) {
    collectives += static_cast<int>(ev.collectives.size());
    for (const auto& d : ev.devices) expectedDeviceBars += d.busy_end > d.busy_start;
  }
  EXPECT_EQ(stageBars, events.size());
  EXPECT_EQ(deviceBars, expectedDeviceBars);
  EXPECT_EQ(timeline->collectiveRows(), collectives);
  EXPECT_TRUE(timeline->summary().contains(QLatin1String("cpu:4")));
  EXPECT_EQ(timeline->plot()->xAxis->label(), QStringLiteral("time since the iteration began (ms)"));

  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("trace.json"));
  EXPECT_EQ(w.window->exportTrace(path), QString());
  QFile file(path);
  ASSERT_TRUE(file.open(QIODevice::ReadOnly));
  EXPECT_TRUE(file.readAll().contains("\"ph\""));
}

TEST(MainWindow, ScreenshotAllWritesEveryPageAt1280x800) {
  Window w(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 12));
  QTemporaryDir dir;
  ScreenshotRunner runner(w.window.get(), dir.path());
  bool finished = false, ok = false;
  QObject::connect(&runner, &ScreenshotRunner::finished, [&](bool result) {
    finished = true;
    ok = result;
  });
  runner.start();
  ASSERT_TRUE(waitUntil([&] { return finished; }, 120000));
  EXPECT_TRUE(ok) << runner.problems().join(QLatin1Char('\n')).toStdString();
  // One picture per page, the Iteration page at several stages.
  int iterationShots = 0;
  for (const QString& path : runner.written()) {
    const QImage image(path);
    EXPECT_EQ(image.size(), QSize(1280, 800)) << path.toStdString();
    iterationShots += path.contains(QLatin1String("-iteration-"));
  }
  EXPECT_GE(runner.written().size(), 5 + 6);
  EXPECT_GE(iterationShots, 6);
  const QStringList written = runner.written();
  for (const QString& id : MainWindow::pageIds()) {
    EXPECT_TRUE(std::any_of(written.begin(), written.end(), [&](const QString& p) { return p.contains(QLatin1Char('-') + id); })) << id.toStdString();
  }
}

TEST(MainWindow, RemembersSettingsPageAndThemeBetweenRuns) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, dir.path());
  QSettings().clear();
  MainWindow::Options options;
  options.persistent = true;
  options.theme = QStringLiteral("dark");
  {
    AppContext context;
    auto* engine = new EngineController();
    MainWindow window(&context, engine, options);
    engine->setParent(&window);
    context.setSettings(settingsFor(QStringLiteral("cpu:3"), QStringLiteral("mlp-bn"), 24));
    window.showPage(QStringLiteral("quiz"));
    window.close();
  }
  AppContext restored;
  auto* engine = new EngineController();
  options.theme.clear();  // take the saved one
  MainWindow window(&restored, engine, options);
  engine->setParent(&window);
  EXPECT_EQ(restored.settings().devices, QStringLiteral("cpu:3"));
  EXPECT_EQ(restored.settings().preset, QStringLiteral("mlp-bn"));
  EXPECT_EQ(restored.settings().batchSize, 24);
  EXPECT_EQ(window.currentPageId(), QStringLiteral("quiz"));
  EXPECT_EQ(QSettings().value(QStringLiteral("window/theme")).toString(), QStringLiteral("dark"));
  window.close();
  QSettings().clear();
  QSettings::setDefaultFormat(QSettings::NativeFormat);
}

}  // namespace gui

namespace gui {

TEST(MainWindow, TimelineOpensAMergedMultiProcessTrace) {
  Window w(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 8));
  auto* timeline = qobject_cast<TimelinePage*>(w.window->page(QStringLiteral("timeline")));
  ASSERT_NE(timeline, nullptr);
  QTemporaryDir dir;
  // Two ranks' traces as `dpv trace merge` joins them: a process per rank, two tracks each.
  const std::string rank = R"({"traceEvents":[
    {"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"dpviz DDP"}},
    {"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"host"}},
    {"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"cpu"}},
    {"name":"Forward 0","cat":"forward","ph":"X","pid":1,"tid":1,"ts":0,"dur":40},
    {"name":"Bucket 0 all-reduce","cat":"backward","ph":"X","pid":1,"tid":0,"ts":50,"dur":30,
     "args":{"collectives":[{"op":"all_reduce","ranks":2,"bytes":4096,"seconds":3e-5,"algbw_GBps":0.13,"busbw_GBps":0.13}]}}]})";
  const QString merged = dir.filePath(QStringLiteral("merged.json"));
  {
    QFile f(merged);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(QByteArray::fromStdString(dpv::merge_chrome_traces({rank, rank}, {"r0", "r1"})));
  }
  EXPECT_EQ(openTraceAndWait(timeline, merged), QString());
  EXPECT_TRUE(timeline->showingOpenedTrace());
  EXPECT_EQ(timeline->laneCount(), 4);
  EXPECT_EQ(timeline->bars().size(), 4);
  QSet<int> rows;
  for (const auto& b : timeline->bars()) rows.insert(b.row);
  EXPECT_EQ(rows.size(), 4) << "one lane per rank and track";
  EXPECT_EQ(timeline->collectiveRows(), 2) << "each rank's all-reduce in the table";
  EXPECT_TRUE(timeline->summary().contains(QLatin1String("2 processes"))) << timeline->summary().toStdString();

  const QString broken = dir.filePath(QStringLiteral("broken.json"));
  {
    QFile f(broken);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write("{\"traceEvents\": 3}");
  }
  EXPECT_TRUE(openTraceAndWait(timeline, broken).contains(QLatin1String("is not a Chrome trace")));
  EXPECT_TRUE(timeline->showingOpenedTrace()) << "a failed open keeps what was shown";
  // A FIFO is refused at once instead of freezing the window on a read that never ends.
  const QString fifo = dir.filePath(QStringLiteral("trace.fifo"));
  ASSERT_EQ(::mkfifo(fifo.toLocal8Bit().constData(), 0600), 0);
  const QString fifoError = openTraceAndWait(timeline, fifo);
  EXPECT_TRUE(fifoError.contains(QLatin1String("not a regular file"))) << fifoError.toStdString();
  EXPECT_TRUE(timeline->showingOpenedTrace());
}

}  // namespace gui
