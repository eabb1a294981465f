// The Memory page (gui/memory): it shows the course::MemoryComparison it is given as it is (the
// table's cells, the charts' titles and their shared value axis are the comparison's numbers), the
// "what fits" verdict follows the GPU memory across the estimate's bytes per GPU, the panel says it
// is a formula, a bad run description shows the engine's own error, and a cancelled run's late
// reply is dropped. Comparisons are built by hand here, except where the engine's error is needed.
#include <gtest/gtest.h>

#include <QLabel>
#include <QDir>
#include <QFile>
#include <QPushButton>
#include <QTableWidget>
#include <QTemporaryDir>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <qcustomplot.h>

#include "engine/error.h"
#include "gui/common/context.h"
#include "gui/common/lesson_panel.h"
#include "gui/memory/charts.h"
#include "gui/memory/fits_panel.h"
#include "gui/memory/page.h"
#include "gui/runtime/engine_types.h"
#include "gui_test_support.h"

namespace gui {
namespace {

using dpv::MemoryBreakdown;
using dpv::StrategyKind;
using dpv::course::MemoryComparison;
using dpv::course::StrategyMemory;

// A rank's bytes with every part different, so a cell showing the wrong part or rank is caught.
MemoryBreakdown breakdown(int strategy, int stage, int rank) {
  const int64_t base = 1000 * (strategy + 1) + 100 * stage + 10 * rank;
  MemoryBreakdown m;
  m.batch = base + 1;
  m.parameters = base + 2;
  m.gradients = stage > 0 ? base + 3 : 0;
  m.activations = base + 4;
  m.optimizer = base + 5;
  m.output = base + 6;
  m.buckets = strategy < 2 ? base + 7 : 0;
  m.gathered = strategy == 3 ? base + 8 : 0;
  m.other = 9;
  return m;
}

MemoryComparison handMade(int world) {
  MemoryComparison c;
  c.run.preset = "simple";
  c.run.devices = "cpu:" + std::to_string(world);
  c.run.batch = 8;
  c.run.optimizer.kind = dpv::OptimizerKind::Adam;
  c.parameters = 1234;
  c.world = world;
  const StrategyKind kinds[] = {StrategyKind::DistributedDataParallel, StrategyKind::Zero1, StrategyKind::Zero2, StrategyKind::Zero3};
  for (int s = 0; s < 4; ++s) {
    StrategyMemory m;
    m.strategy = kinds[s];
    const dpv::Stage stages[] = {{dpv::StageKind::Forward, 0, "Forward 0"}, {dpv::StageKind::Backward, 0, "Backward 0"},
                                 {dpv::StageKind::Step, -1, "Step"}};
    for (int i = 0; i < 3; ++i) {
      dpv::course::MemorySample sample{stages[i], {}};
      for (int r = 0; r < world; ++r) sample.ranks.push_back(breakdown(s, i, r));
      m.samples.push_back(sample);
    }
    for (int r = 0; r < world; ++r) {
      m.at_peak.push_back(breakdown(s, 1, r));
      m.peak_total.push_back(breakdown(s, 1, r).total());
      m.peak_sample.push_back(1);
      m.persistent.push_back(breakdown(s, 2, r));
    }
    c.strategies.push_back(m);
  }
  c.formula = dpv::course::memory_formula(c.parameters, world, dpv::DType::Float32, c.run.optimizer);
  c.differences.push_back({StrategyKind::Zero2, dpv::MemoryKind::Parameters, 24,
                           "The flat parameter was padded from 1234 to 1240 elements, 24 bytes, so every rank's slice is equal."});
  dpv::course::MemoryDifference peak{StrategyKind::Zero3, dpv::MemoryKind::Gathered, 4960, "The gathered flat parameter is whole at the peak."};
  peak.at_peak = true;
  c.differences.push_back(peak);
  return c;
}

qlonglong cell(QTableWidget* table, int row, int column) {
  QTableWidgetItem* item = table->item(row, column);
  return item ? item->data(Qt::UserRole).toLongLong() : -1;
}

TEST(MemoryPage, ShowsTheFourStrategiesWithTheNumbersItWasGiven) {
  AppContext context;
  MemoryPage page(&context);
  page.resize(1280, 800);
  page.show();
  const auto given = std::make_shared<const MemoryComparison>(handMade(2));
  page.showComparison(given);
  settleEvents();
  QTableWidget* table = page.table();
  ASSERT_EQ(table->columnCount(), 1 + 2 * 4);
  const QStringList names{"DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};
  for (int rank : {0, 1}) {
    page.setRank(rank);
    const QList<BreakdownPart>& parts = breakdownParts();
    for (int s = 0; s < 4; ++s) {
      const StrategyMemory& m = given->strategies[static_cast<size_t>(s)];
      EXPECT_TRUE(table->horizontalHeaderItem(1 + 2 * s)->text().startsWith(names[s]));
      for (int row = 0; row < parts.size(); ++row) {
        EXPECT_EQ(cell(table, row, 1 + 2 * s), m.at_peak[static_cast<size_t>(rank)].*parts[row].bytes) << s << " " << row;
        EXPECT_EQ(cell(table, row, 2 + 2 * s), m.persistent[static_cast<size_t>(rank)].*parts[row].bytes) << s << " " << row;
      }
      EXPECT_EQ(cell(table, static_cast<int>(parts.size()), 1 + 2 * s), m.peak_total[static_cast<size_t>(rank)]);
      // Each chart is titled with its strategy and that rank's peak, in the engine's numbers.
      auto* title = qobject_cast<QCPTextElement*>(page.charts()->plot(s)->plotLayout()->element(0, 0));
      ASSERT_NE(title, nullptr);
      EXPECT_TRUE(title->text().contains(names[s])) << title->text().toStdString();
      EXPECT_TRUE(title->text().contains(exactBytes(m.peak_total[static_cast<size_t>(rank)])));
      EXPECT_TRUE(title->text().contains(QStringLiteral("after ") + stageShortTitle(dpv::StageKind::Backward))) << title->text().toStdString();
      // One tick per stage, named by the stage, and the parameters' bars in proportion to the engine's bytes.
      QCustomPlot* plot = page.charts()->plot(s);
      auto ticker = qSharedPointerDynamicCast<QCPAxisTickerText>(plot->xAxis->ticker());
      ASSERT_TRUE(ticker);
      ASSERT_EQ(ticker->ticks().size(), static_cast<int>(m.samples.size()));
      EXPECT_EQ(ticker->ticks().value(2), stageShortTitle(dpv::StageKind::Step));
      auto* bars = plot->findChild<QCPBars*>(QStringLiteral("parameters"));
      ASSERT_NE(bars, nullptr);
      ASSERT_EQ(bars->data()->size(), static_cast<int>(m.samples.size()));
      const double ratio = bars->data()->at(2)->value / bars->data()->at(0)->value;
      EXPECT_DOUBLE_EQ(ratio, static_cast<double>(m.samples[2].ranks[static_cast<size_t>(rank)].parameters) /
                                  static_cast<double>(m.samples[0].ranks[static_cast<size_t>(rank)].parameters));
    }
  }
  // One value axis for the four: the same range in every chart.
  for (int s = 1; s < 4; ++s) EXPECT_EQ(page.charts()->plot(s)->yAxis->range(), page.charts()->plot(0)->yAxis->range());
  EXPECT_TRUE(page.captionText().contains(QStringLiteral("1234"))) << page.captionText().toStdString();
}

TEST(MemoryPage, ShowsTheFormulaBesideTheMeasuredFiguresAndTheDifferences) {
  AppContext context;
  MemoryPage page(&context);
  page.showComparison(std::make_shared<const MemoryComparison>(handMade(4)));
  const MemoryComparison& shown = *page.result();
  for (StrategyKind kind : {StrategyKind::DistributedDataParallel, StrategyKind::Zero1, StrategyKind::Zero2, StrategyKind::Zero3})
    EXPECT_TRUE(page.formulaText().contains(exactBytes(static_cast<int64_t>(shown.formula.for_strategy(kind)))))
        << dpv::strategy_short_name(kind) << ": " << page.formulaText().toStdString();
  EXPECT_TRUE(page.formulaText().contains(exactBytes(breakdown(0, 2, 0).total())));  // DDP, rank 0, between iterations
  const QString differences = page.differencesText();
  EXPECT_TRUE(differences.contains(QStringLiteral("padded from 1234 to 1240 elements")));
  // Between iterations first, then at the peak: each line under its own heading.
  EXPECT_LT(differences.indexOf(QStringLiteral("Between iterations")), differences.indexOf(QStringLiteral("padded from")));
  EXPECT_LT(differences.indexOf(QStringLiteral("At each strategy")), differences.indexOf(QStringLiteral("gathered flat parameter is whole")));
  EXPECT_LT(differences.indexOf(QStringLiteral("padded from")), differences.indexOf(QStringLiteral("At each strategy")));
  EXPECT_TRUE(page.fitsPanel()->noteText().contains(QStringLiteral("A formula, not a run")));
}

TEST(MemoryPage, TheWhatFitsVerdictFlipsWhereTheGpuMemoryCrossesTheBytesPerGpu) {
  AppContext context;
  MemoryPage page(&context);
  MemoryFitsPanel* fits = page.fitsPanel();
  EXPECT_TRUE(fits->estimates().empty()) << "nothing to scale before a run";
  page.showComparison(std::make_shared<const MemoryComparison>(handMade(4)));
  fits->setModelSize(QStringLiteral("7B"));
  fits->setGpuCount(8);
  ASSERT_EQ(fits->estimates().size(), 4u);
  QTableWidget* table = fits->table();
  for (int row = 0; row < 4; ++row) {
    const double bytes = fits->estimates()[static_cast<size_t>(row)].bytes_per_gpu;
    ASSERT_GT(bytes, 0);
    const double gib = bytes / (1024.0 * 1024.0 * 1024.0);
    fits->setGpuMemory(QString::number(gib * 1.01, 'f', 6));
    EXPECT_TRUE(fits->estimates()[static_cast<size_t>(row)].fits) << row;
    EXPECT_EQ(table->item(row, 2)->text(), QStringLiteral("fits"));
    fits->setGpuMemory(QString::number(gib * 0.99, 'f', 6));
    EXPECT_FALSE(fits->estimates()[static_cast<size_t>(row)].fits) << row;
    EXPECT_EQ(table->item(row, 2)->text(), QStringLiteral("does not fit"));
  }
  fits->setModelSize(QStringLiteral("seven billion"));
  EXPECT_TRUE(fits->estimates().empty());
  EXPECT_TRUE(fits->problemText().contains(QStringLiteral("seven billion")));
}

TEST(MemoryPage, ReadsModelSizesAsALearnerTypesThem) {
  EXPECT_EQ(MemoryFitsPanel::parseParameterCount(QStringLiteral("125M")), 125000000);
  EXPECT_EQ(MemoryFitsPanel::parseParameterCount(QStringLiteral("1.3B")), 1300000000);
  EXPECT_EQ(MemoryFitsPanel::parseParameterCount(QStringLiteral(" 70 b ")), 70000000000);
  EXPECT_EQ(MemoryFitsPanel::parseParameterCount(QStringLiteral("7e9")), 7000000000);
  EXPECT_EQ(MemoryFitsPanel::parseParameterCount(QStringLiteral("0")), std::nullopt);
  EXPECT_EQ(MemoryFitsPanel::parseParameterCount(QStringLiteral("7X")), std::nullopt);
  EXPECT_EQ(MemoryFitsPanel::parseGibibytes(QStringLiteral("80 GiB")), 80.0);
  EXPECT_EQ(MemoryFitsPanel::parseGibibytes(QStringLiteral("-1")), std::nullopt);
}

TEST(MemoryPage, ABadRunShowsTheEnginesErrorWithoutCrashing) {
  AppContext context;
  AppSettings settings;
  settings.preset = QStringLiteral("no-such-model");
  context.setSettings(settings);
  MemoryPage page(&context);
  page.show();
  QString expected;
  try {
    dpv::course::compare_memory(page.spec());
  } catch (const dpv::Error& e) {
    expected = QString::fromStdString(e.full());
  }
  ASSERT_FALSE(expected.isEmpty()) << "the engine refuses an unknown model";
  page.run();
  ASSERT_TRUE(waitUntil([&] { return !page.running(); }));
  EXPECT_EQ(page.errorText(), expected);
  EXPECT_EQ(page.statusText(), expected);
  EXPECT_EQ(page.result(), nullptr);
  EXPECT_TRUE(page.runButton()->isEnabled());
  EXPECT_EQ(page.runButton()->shortcut(), QKeySequence(Qt::CTRL | Qt::Key_R));
}

// A runner the test releases: it blocks (bounded) until told to return.
struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  bool open = false;
  std::atomic<int> entered{0};
  std::atomic<int> returned{0};
  MemoryWorker::Runner runner() {
    return [this](const dpv::RunSpec& spec) {
      ++entered;
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait_for(lock, std::chrono::seconds(60), [this] { return open; });
      MemoryComparison c = handMade(2);
      c.run = spec;
      ++returned;
      return c;
    };
  }
  void release() {
    {
      const std::lock_guard<std::mutex> lock(mutex);
      open = true;
    }
    changed.notify_all();
  }
};

TEST(MemoryPage, ACancelledRunsReplyIsDropped) {
  AppContext context;
  Gate gate;
  MemoryPage page(&context, nullptr, gate.runner());
  page.run();
  EXPECT_TRUE(page.running());
  EXPECT_FALSE(page.runButton()->isEnabled());
  // Cancelled while the comparison runs (a request cancelled before it starts is skipped).
  ASSERT_TRUE(waitUntil([&] { return gate.entered.load() == 1; }));
  page.cancel();
  EXPECT_FALSE(page.running());
  gate.release();
  ASSERT_TRUE(waitUntil([&] { return gate.returned.load() == 1; }));
  settleEvents();
  EXPECT_EQ(page.result(), nullptr) << "the cancelled run's comparison is not shown";
  page.run();
  ASSERT_TRUE(waitUntil([&] { return page.result() != nullptr; }));
  EXPECT_EQ(gate.returned.load(), 2);
  EXPECT_FALSE(page.running());
}

}  // namespace
}  // namespace gui

namespace gui {
namespace {

// A real comparison on the engine: the table and the charts' titles are the result's numbers, and
// a clicked stage names the engine's own stage title.
TEST(MemoryPage, ARealRunShowsTheEnginesComparison) {
  AppContext context;
  context.setSettings(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("mlp-bn"), 8));
  MemoryPage page(&context);
  page.resize(1280, 800);
  page.show();
  page.setOptimizer(MemoryPage::Optimizer::Adam);
  page.run();
  ASSERT_TRUE(waitUntil([&] { return !page.running(); }, 120000));
  ASSERT_NE(page.result(), nullptr) << page.errorText().toStdString();
  const MemoryComparison& c = *page.result();
  EXPECT_EQ(c.run.optimizer.kind, dpv::OptimizerKind::Adam);
  ASSERT_EQ(c.strategies.size(), 4u);
  const QList<BreakdownPart>& parts = breakdownParts();
  for (int s = 0; s < 4; ++s)
    for (int row = 0; row < parts.size(); ++row)
      EXPECT_EQ(cell(page.table(), row, 2 + 2 * s), c.strategies[static_cast<size_t>(s)].persistent[0].*parts[row].bytes);
  const StrategyMemory& zero3 = c.strategies[3];
  ASSERT_FALSE(zero3.samples.empty());
  settleEvents();
  // The charts keep their height whatever rows they are in (the page scrolls instead).
  for (int s = 0; s < 4; ++s) EXPECT_GE(page.charts()->plot(s)->height(), page.charts()->plot(s)->minimumHeight()) << s;
  page.showStage(3, 0);
  EXPECT_TRUE(page.stageText().contains(QString::fromStdString(zero3.samples[0].stage.title).toHtmlEscaped())) << page.stageText().toStdString();
  EXPECT_TRUE(page.stageText().contains(exactBytes(zero3.samples[0].ranks[0].total())));
}

// In the main window, after a run of the settings bar's model: the charts keep their height in
// whatever rows they are (the page scrolls), and the navigation lists the page.
TEST(MemoryPage, InTheWindowTheChartsKeepTheirHeightAfterARun) {
  SizedWindow w(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 10), QSize(1280, 800), QStringLiteral("dark"));
  w.window->showPage(QStringLiteral("memory"));
  ASSERT_EQ(w.window->currentPageId(), QStringLiteral("memory"));
  auto* page = qobject_cast<MemoryPage*>(w.window->page(QStringLiteral("memory")));
  ASSERT_NE(page, nullptr);
  page->run();
  ASSERT_TRUE(waitUntil([&] { return !page->running(); }, 120000));
  ASSERT_NE(page->result(), nullptr) << page->errorText().toStdString();
  settleEvents();
  for (int s = 0; s < 4; ++s) EXPECT_GE(page->charts()->plot(s)->height(), page->charts()->plot(s)->minimumHeight()) << s;
}

// The lesson on memory (lessons/zero/memory.md) shows under the figures where the lessons have
// it, and the page leaves the panel out where they do not.
TEST(MemoryPage, ShowsTheMemoryLessonWhereTheLessonsHaveIt) {
  QTemporaryDir lessons;
  ASSERT_TRUE(lessons.isValid());
  QFile intro(lessons.filePath(QStringLiteral("intro.md")));  // what marks a lessons folder
  ASSERT_TRUE(intro.open(QIODevice::WriteOnly));
  intro.write("# Introduction\n");
  intro.close();
  // $DPVIZ_LESSONS names the folder for this test only, whichever way it ends.
  struct Restore {
    QByteArray previous = qgetenv("DPVIZ_LESSONS");
    ~Restore() { previous.isNull() ? void(qunsetenv("DPVIZ_LESSONS")) : void(qputenv("DPVIZ_LESSONS", previous)); }
  } restore;
  qputenv("DPVIZ_LESSONS", lessons.path().toUtf8());
  AppContext context;
  {
    MemoryPage without(&context);
    EXPECT_EQ(without.findChild<LessonPanel*>(), nullptr);
  }
  ASSERT_TRUE(QDir(lessons.path()).mkpath(QStringLiteral("zero")));
  QFile file(lessons.filePath(QStringLiteral("zero/memory.md")));
  ASSERT_TRUE(file.open(QIODevice::WriteOnly));
  file.write("# Memory under DDP and ZeRO\n\nThe optimizer state is what ZeRO-1 shards.\n");
  file.close();
  MemoryPage with(&context);
  auto* panel = with.findChild<LessonPanel*>();
  ASSERT_NE(panel, nullptr);
  EXPECT_FALSE(panel->lessonMissing());
  EXPECT_TRUE(panel->lastMarkdown().contains(QStringLiteral("what ZeRO-1 shards"))) << panel->lastMarkdown().toStdString();
}

}  // namespace
}  // namespace gui
