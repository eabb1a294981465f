// Layout at the smallest supported screen (1024x640): the window and every page fit, text keeps
// a readable size, and the window is never made larger than the screen it opens on.
#include <gtest/gtest.h>

#include <QScreen>
#include <QLabel>
#include <QListWidget>
#include <QScrollArea>
#include <QScrollBar>
#include <QSplitter>

#include "gui/common/context.h"
#include "gui/app/main_window.h"
#include "gui/common/page.h"
#include "gui/iteration/page.h"
#include "gui/runtime/engine_controller.h"
#include "gui_test_support.h"

namespace gui {
namespace {

TEST(WindowSize, EveryPageFitsTheSmallestSupportedScreen) {
  SizedWindow w(settingsFor(QStringLiteral("cpu:8"), QStringLiteral("simple"), 10), QSize(1024, 640));
  MainWindow& window = *w.window;
  for (const QString& id : MainWindow::pageIds()) {
    window.showPage(id);
    settleEvents();
    const QSize hint = window.minimumSizeHint();
    EXPECT_LE(hint.width(), 1024) << id.toStdString() << " needs a wider window";
    EXPECT_LE(window.page(id)->minimumSizeHint().width(), window.page(id)->parentWidget()->width()) << id.toStdString() << " scrolls sideways";
    EXPECT_LE(hint.height(), 640) << id.toStdString() << " needs a taller window: " << window.page(id)->minimumSizeHint().height();
    EXPECT_LE(window.width(), 1024) << id.toStdString();
    EXPECT_LE(window.height(), 640) << id.toStdString();
  }
}

}  // namespace
}  // namespace gui

namespace gui {
namespace {

TEST(WindowSize, NeverOpensLargerThanTheScreen) {
  AppContext context;
  auto* engine = new EngineController();
  MainWindow::Options options;
  options.persistent = false;
  options.theme = QStringLiteral("light");
  MainWindow window(&context, engine, options);
  engine->setParent(&window);
  ASSERT_NE(window.screen(), nullptr);
  const QSize available = window.screen()->availableGeometry().size();
  ASSERT_LT(available.width(), 1280) << "the offscreen test screen is smaller than the default window";
  // The default 1280x800 is shrunk to the screen (once shown, never below the window's minimum,
  // which fits 1024x640: see the test above).
  EXPECT_EQ(window.size(), QSize(1280, 800).boundedTo(available));
  EXPECT_LT(window.width(), 1280);
}

}  // namespace
}  // namespace gui

namespace gui {
namespace {

// At 1024x640 the Iteration page fits the window's height: its stepper row (Restart, Back, Play,
// Step) must never sit below the fold, half cut, as it did when the side panels' minimum heights
// (with a tensor in the inspector) added up to more than the window had.
TEST(WindowSize, TheIterationStepperIsNeverBelowTheFold) {
  SizedWindow w(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10), QSize(1024, 640));
  MainWindow& window = *w.window;
  EngineController* engine = w.engine;
  window.showPage(QStringLiteral("iteration"));
  auto* page = qobject_cast<IterationPage*>(window.page(QStringLiteral("iteration")));
  ASSERT_NE(page, nullptr);
  bool done = false;
  ASSERT_TRUE(waitUntil([&] { return engine->info().plan.size() > 2; }));
  page->seekTo(2, [&] { done = true; });
  ASSERT_TRUE(waitUntil([&] { return done; }));
  ASSERT_TRUE(page->inspectChip(1, dpv::TensorRole::Input));
  settleEvents();
  // The position beside the stepper shows a form that fits its label (never cut mid-word).
  QLabel* position = nullptr;
  for (QLabel* label : page->findChildren<QLabel*>())
    if (label->objectName() == QLatin1String("hintLabel") &&
        (label->text().startsWith(QLatin1String("3/")) || label->text().startsWith(QLatin1String("stage 3 of"))))
      position = label;
  ASSERT_NE(position, nullptr) << "the stepper's position label shows stage 3 at 1024x640";
  EXPECT_LE(position->fontMetrics().horizontalAdvance(position->text()), position->width()) << position->text().toStdString();
  EXPECT_TRUE(page->positionText().startsWith(QLatin1String("stage 3 of"))) << page->positionText().toStdString();
  auto* scroll = qobject_cast<QScrollArea*>(page->parentWidget()->parentWidget());
  ASSERT_NE(scroll, nullptr);
  EXPECT_EQ(scroll->verticalScrollBar()->maximum(), 0)
      << "side panels " << page->sidePanels()->minimumSizeHint().height()<< " the page needs " << page->minimumSizeHint().height() << " px of " << scroll->viewport()->height();
}

}  // namespace
}  // namespace gui

namespace gui {
namespace {

// Below 1200 px the navigation shows icons only (the titles become tooltips), so the pages, the
// Iteration picture above all, get the width; a wider window shows the titles again.
TEST(WindowSize, ANarrowWindowShowsTheNavigationAsIcons) {
  SizedWindow w(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10), QSize(1024, 640));
  settleEvents();
  auto* nav = w.window->findChild<QListWidget*>(QStringLiteral("navigation"));
  auto* column = w.window->findChild<QWidget*>(QStringLiteral("navigationColumn"));
  ASSERT_NE(nav, nullptr);
  ASSERT_NE(column, nullptr);
  const int narrowColumn = column->width();
  EXPECT_LT(narrowColumn, 80);
  for (int i = 0; i < nav->count(); ++i) {
    EXPECT_TRUE(nav->item(i)->text().isEmpty()) << i;
    EXPECT_FALSE(nav->item(i)->toolTip().isEmpty()) << i;
  }
  w.window->resize(1600, 900);
  ASSERT_GE(w.window->width(), 1200);
  settleEvents();
  EXPECT_GT(column->width(), narrowColumn);
  for (int i = 0; i < nav->count(); ++i) EXPECT_FALSE(nav->item(i)->text().isEmpty()) << i;
}

}  // namespace
}  // namespace gui
