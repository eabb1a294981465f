// Every page readable at the window sizes a learner uses (1024x640, 1280x800, 1920x1080), light
// and dark: no text under 9 pt on screen (widgets' fonts, and scene text at the view's scale), no
// text items on top of each other, no label elided or cut. The Iteration page is checked in each
// mode (DataParallel, DDP) with 4 and 8 devices. A failure names page, size, theme, widget and text.
#include <gtest/gtest.h>

#include <QDialog>
#include <QGraphicsView>
#include <QHeaderView>
#include <QScreen>
#include <QScrollBar>
#include <QStatusBar>
#include <QTableWidget>
#include <memory>

#include "gui/app/main_window.h"
#include "gui/ddp/scene.h"
#include "gui/iteration/page.h"
#include "gui/runtime/engine_controller.h"
#include "gui_test_support.h"
#include "layout_checks.h"

namespace gui {
namespace {

struct Case {
  QSize size;
  QString theme;
};

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  return std::to_string(info.param.size.width()) + "x" + std::to_string(info.param.size.height()) + "_" + info.param.theme.toStdString();
}

class LayoutSizes : public ::testing::TestWithParam<Case> {
 protected:
  QString where(const QString& page) const {
    const Case& c = GetParam();
    return QStringLiteral("%1 at %2x%3 (%4)").arg(page).arg(c.size.width()).arg(c.size.height()).arg(c.theme);
  }
  // Adds the window's problems as shown now, each prefixed with where it was seen.
  void collect(QWidget* window, const QString& page) {
    settleEvents();
    for (const QString& p : layout::readabilityProblems(window)) problems_ << where(page) + QStringLiteral(": ") + p;
  }
  void report() {
    problems_.removeDuplicates();
    EXPECT_TRUE(problems_.isEmpty()) << problems_.size() << " problems:\n" << problems_.join(QLatin1Char('\n')).toStdString();
  }
  QStringList problems_;
};

TEST_P(LayoutSizes, EveryPageIsReadable) {
  const Case& c = GetParam();
  SizedWindow w(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10), c.size, c.theme);
  ASSERT_TRUE(waitUntil([&] { return w.engine->hasIteration() && !w.engine->busy(); }));
  for (const QString& id : MainWindow::pageIds()) {
    if (id == QLatin1String("iteration")) continue;  // in its modes below
    w.window->showPage(id);
    collect(w.window.get(), id);
  }
  report();
}

// The Iteration page in one mode with `devices` devices, at a stage in the middle of the
// iteration and one near its end (chips of the batch, the outputs and the gradients).
TEST_P(LayoutSizes, TheIterationPageIsReadableInEveryMode) {
  const Case& c = GetParam();
  // A batch of 16: every device's chunk has two samples or more (BatchNorm needs them).
  SizedWindow w(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 16), c.size, c.theme);
  w.window->showPage(QStringLiteral("iteration"));
  IterationPage* page = w.iteration();
  ASSERT_NE(page, nullptr);
  page->setSpeed(0);
  for (int devices : {4, 8}) {
    for (bool ddp : {false, true}) {
      AppSettings s = settingsFor(QStringLiteral("cpu:%1").arg(devices), QStringLiteral("mlp-bn"), 16);
      s.strategy = ddp ? dpv::StrategyKind::DistributedDataParallel : dpv::StrategyKind::DataParallel;
      w.context.setSettings(s);
      page->setStrategy(s.strategy);
      ASSERT_TRUE(waitUntil([&] {
        return w.engine->hasIteration() && !w.engine->busy() && w.engine->info().ddp == ddp &&
               w.engine->info().deviceLabels.size() == devices;
      })) << devices << " devices, ddp " << ddp;
      const int stages = static_cast<int>(w.engine->info().plan.size());
      for (int stage : {stages / 2, stages - 2}) {
        bool done = false;
        page->seekTo(stage, [&] { done = true; });
        ASSERT_TRUE(waitUntil([&] { return done; })) << "stage " << stage;
        const QString name = QStringLiteral("iteration (%1, %2 devices, stage %3)")
                                 .arg(ddp ? QStringLiteral("DDP") : QStringLiteral("DataParallel"))
                                 .arg(devices)
                                 .arg(stage);
        collect(w.window.get(), name);
        // The picture fills its canvas on the side that limits it (scaled up on a large window).
        QGraphicsScene* scene = ddp ? static_cast<QGraphicsScene*>(page->ddpScene()) : page->scene();
        QGraphicsView* view = scene->views().value(0);
        ASSERT_NE(view, nullptr);
        const QRect drawn = view->mapFromScene(scene->sceneRect()).boundingRect();
        const QSize canvas = view->viewport()->size();
        if (drawn.width() < 0.9 * canvas.width() && drawn.height() < 0.9 * canvas.height())
          problems_ << where(name) + QStringLiteral(": the scene uses %1x%2 of a %3x%4 canvas")
                                         .arg(drawn.width()).arg(drawn.height()).arg(canvas.width()).arg(canvas.height());
      }
    }
  }
  report();
}

INSTANTIATE_TEST_SUITE_P(WindowSizes, LayoutSizes,
                         ::testing::Values(Case{QSize(1024, 640), QStringLiteral("light")}, Case{QSize(1024, 640), QStringLiteral("dark")},
                                           Case{QSize(1280, 800), QStringLiteral("light")}, Case{QSize(1280, 800), QStringLiteral("dark")},
                                           Case{QSize(1920, 1080), QStringLiteral("light")}, Case{QSize(1920, 1080), QStringLiteral("dark")}),
                         caseName);

}  // namespace
}  // namespace gui

namespace gui {
namespace {

// Help > Keyboard shortcuts shows its whole table: the same keys do different things on
// different pages, so the "Where" column must be on screen, with no scroll bar where there is room.
TEST(LayoutDialogs, TheShortcutsTableShowsEveryColumn) {
  SizedWindow w(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10), QSize(1280, 800));
  const std::unique_ptr<QDialog> dialog(w.window->createShortcutsDialog());
  dialog->show();
  settleEvents();
  auto* table = dialog->findChild<QTableWidget*>(QStringLiteral("shortcutTable"));
  ASSERT_NE(table, nullptr);
  ASSERT_GT(table->rowCount(), 5);
  for (int c = 0; c < table->columnCount(); ++c) {
    const int right = table->horizontalHeader()->sectionViewportPosition(c) + table->horizontalHeader()->sectionSize(c);
    EXPECT_FALSE(table->isColumnHidden(c));
    EXPECT_LE(right, table->viewport()->width()) << table->horizontalHeaderItem(c)->text().toStdString() << " runs out of the dialog";
    int widest = 0;
    for (int r = 0; r < table->rowCount(); ++r) widest = std::max(widest, table->fontMetrics().horizontalAdvance(table->item(r, c)->text()));
    EXPECT_GE(table->horizontalHeader()->sectionSize(c), widest) << table->horizontalHeaderItem(c)->text().toStdString() << " is cut";
  }
  EXPECT_FALSE(table->horizontalScrollBar()->isVisible());
  const int rows = table->rowCount() * table->rowHeight(0) + table->horizontalHeader()->height();
  if (rows < dialog->screen()->availableGeometry().height() * 0.8) { EXPECT_FALSE(table->verticalScrollBar()->isVisible()) << "the dialog has room for its " << table->rowCount() << " rows"; }
  EXPECT_TRUE(layout::readabilityProblems(dialog.get()).isEmpty()) << layout::readabilityProblems(dialog.get()).join(QLatin1Char('\n')).toStdString();
}

}  // namespace
}  // namespace gui

namespace gui {
namespace {

// An engine error in the status bar at 1024x640 is never drawn under the engine status (the
// permanent label on the right): the status steps aside while the message shows, and comes back.
TEST(LayoutStatusBar, AnErrorMessageNeverRunsUnderTheEngineStatus) {
  SizedWindow w(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10), QSize(1024, 640));
  ASSERT_TRUE(waitUntil([&] { return w.engine->hasIteration() && !w.engine->busy(); }));
  w.window->showPage(QStringLiteral("iteration"));
  const QString error = QStringLiteral("Engine error: ValueError: Caught ValueError in replica 3 on device 3. Expected more than 1 value per channel when training");
  emit w.context.statusMessage(QString(), error);
  settleEvents();
  ASSERT_EQ(w.window->statusBar()->currentMessage(), error);
  EXPECT_TRUE(layout::cutStatusMessage(w.window.get()).isEmpty()) << layout::cutStatusMessage(w.window.get()).join(QLatin1Char('\n')).toStdString();
  w.window->statusBar()->clearMessage();
  settleEvents();
  QLabel* engineStatus = nullptr;
  for (QLabel* label : w.window->statusBar()->findChildren<QLabel*>())
    if (label->text().startsWith(QLatin1String("Engine:"))) engineStatus = label;
  ASSERT_NE(engineStatus, nullptr);
  EXPECT_TRUE(engineStatus->isVisible());
  EXPECT_TRUE(engineStatus->text().contains(QLatin1String("simulated devices"))) << engineStatus->text().toStdString();
}

}  // namespace
}  // namespace gui
