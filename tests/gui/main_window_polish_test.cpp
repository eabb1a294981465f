// The main window's polish: File > Export trace only when there is a trace, "Next" leads through
// the pages in order, a status message belongs to the page shown, the keyboard returns to the page
// after a setting is edited, and Help lists every shortcut the window really has.
#include <gtest/gtest.h>

#include <QAbstractButton>
#include <QAction>
#include <QPushButton>
#include <QTemporaryDir>
#include <QKeyEvent>
#include <QShortcut>
#include <QSpinBox>
#include <QStatusBar>

#include "gui/common/context.h"
#include "gui/app/main_window.h"
#include "gui/app/settings_bar.h"
#include "gui/runtime/engine_controller.h"
#include "gui/timeline/page.h"
#include "gui_test_support.h"

namespace gui {
namespace {

struct PolishWindow {
  AppContext context;
  EngineController* engine = new EngineController();  // owned by the window
  std::unique_ptr<MainWindow> window;
  PolishWindow() {
    context.setSettings(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 10));
    MainWindow::Options options;
    options.persistent = false;
    options.theme = QStringLiteral("light");
    window = std::make_unique<MainWindow>(&context, engine, options);
    engine->setParent(window.get());
    window->resize(1280, 800);
    window->show();
  }
};

TEST(MainWindowPolish, ExportTraceIsDisabledUntilThereIsATrace) {
  PolishWindow w;
  QAction* exportTrace = w.window->exportTraceAction();
  ASSERT_NE(exportTrace, nullptr);
  ASSERT_TRUE(waitUntil([&] { return !w.engine->busy(); }));
  EXPECT_FALSE(exportTrace->isEnabled()) << "no iteration has run";
  auto* timeline = qobject_cast<TimelinePage*>(w.window->page(QStringLiteral("timeline")));
  ASSERT_NE(timeline, nullptr);
  timeline->runIteration();
  ASSERT_TRUE(waitUntil([&] { return !w.engine->lastCompleted().isEmpty(); }));
  EXPECT_TRUE(exportTrace->isEnabled());
  w.context.setSettings(settingsFor(QStringLiteral("cpu:3"), QStringLiteral("simple"), 10));
  EXPECT_FALSE(exportTrace->isEnabled()) << "new settings cleared the recorded iteration";
}

TEST(MainWindowPolish, NextLeadsThroughThePagesInOrder) {
  PolishWindow w;
  w.window->showPage(QStringLiteral("intro"));
  QStringList visited{w.window->currentPageId()};
  while (w.window->nextButton()->isVisible() && visited.size() < 10) {
    w.window->nextButton()->click();
    visited << w.window->currentPageId();
  }
  EXPECT_EQ(visited, MainWindow::pageIds());
  EXPECT_FALSE(w.window->nextButton()->isVisible()) << "the last page has no next";
  w.window->showPage(QStringLiteral("iteration"));
  EXPECT_TRUE(w.window->nextButton()->text().contains(QLatin1String("BatchNorm lab"))) << w.window->nextButton()->text().toStdString();
}

TEST(MainWindowPolish, AStatusMessageBelongsToThePageShown) {
  PolishWindow w;
  w.window->showPage(QStringLiteral("iteration"));
  w.window->page(QStringLiteral("iteration"))->showStatus(QStringLiteral("Engine error: something on the Iteration page"));
  EXPECT_EQ(w.window->statusBar()->currentMessage(), QStringLiteral("Engine error: something on the Iteration page"));
  w.window->showPage(QStringLiteral("timeline"));
  EXPECT_TRUE(w.window->statusBar()->currentMessage().isEmpty());
  // A page in the background (the lab trains on while the learner reads the Timeline) does not
  // speak over the page shown; its message waits until the learner opens it.
  Page* lab = w.window->page(QStringLiteral("bnlab"));
  EXPECT_EQ(lab->pageId().toStdString(), "bnlab");
  lab->showStatus(QStringLiteral("BatchNorm lab stopped: on purpose"));
  EXPECT_TRUE(w.window->statusBar()->currentMessage().isEmpty()) << w.window->statusBar()->currentMessage().toStdString();
  w.window->showPage(QStringLiteral("quiz"));
  EXPECT_TRUE(w.window->statusBar()->currentMessage().isEmpty());
  w.window->showPage(QStringLiteral("bnlab"));
  EXPECT_EQ(w.window->statusBar()->currentMessage(), QStringLiteral("BatchNorm lab stopped: on purpose"));
  w.window->showPage(QStringLiteral("timeline"));
  w.window->showPage(QStringLiteral("bnlab"));
  EXPECT_TRUE(w.window->statusBar()->currentMessage().isEmpty()) << "shown once, not again";
  // A window-wide message (no page id) shows on whatever page is shown.
  emit w.context.statusMessage(QString(), QStringLiteral("for every page"));
  EXPECT_EQ(w.window->statusBar()->currentMessage(), QStringLiteral("for every page"));
}

TEST(MainWindowPolish, TheKeyboardReturnsToThePageAfterASettingIsEdited) {
  PolishWindow w;
  w.window->activateWindow();
  ASSERT_TRUE(QTest::qWaitForWindowActive(w.window.get()));
  w.window->showPage(QStringLiteral("iteration"));
  QSpinBox* batch = nullptr;
  for (QSpinBox* box : w.window->settingsBar()->findChildren<QSpinBox*>())
    if (box->value() == 10) batch = box;
  ASSERT_NE(batch, nullptr);
  batch->setFocus();
  ASSERT_TRUE(waitUntil([&] { return batch->hasFocus(); }, 2000));
  batch->selectAll();
  QTest::keyClicks(batch, QStringLiteral("12"));
  QTest::keyClick(batch, Qt::Key_Return);
  EXPECT_EQ(w.context.settings().batchSize, 12) << "Enter commits at once";
  EXPECT_FALSE(batch->hasFocus());
  QWidget* focus = QApplication::focusWidget();
  ASSERT_NE(focus, nullptr);
  Page* page = w.window->page(QStringLiteral("iteration"));
  EXPECT_TRUE(focus == page || page->isAncestorOf(focus)) << "focus is on " << focus->metaObject()->className();
}

TEST(MainWindowPolish, HelpListsEveryShortcutTheWindowHas) {
  PolishWindow w;
  const QList<MainWindow::ShortcutEntry> listed = w.window->shortcuts();
  auto isListed = [&](const QKeySequence& key) {
    const QString text = key.toString(QKeySequence::NativeText);
    for (const auto& e : listed)
      if (e.keys == text && !e.what.isEmpty()) return true;
    return false;
  };
  int keys = 0;
  for (const QAction* a : w.window->findChildren<QAction*>()) {
    for (const QKeySequence& key : a->shortcuts()) {
      ++keys;
      EXPECT_TRUE(isListed(key)) << "action " << a->text().toStdString() << " " << key.toString().toStdString();
    }
  }
  for (const QShortcut* s : w.window->findChildren<QShortcut*>()) {
    ++keys;
    EXPECT_TRUE(isListed(s->key())) << "shortcut " << s->key().toString().toStdString();
  }
  for (const QAbstractButton* b : w.window->findChildren<QAbstractButton*>()) {
    if (b->shortcut().isEmpty()) continue;
    ++keys;
    EXPECT_TRUE(isListed(b->shortcut())) << "button " << b->text().toStdString();
  }
  EXPECT_GE(keys, 10) << "Ctrl+1..5, quit, help, and the Iteration page's keys at least";
  bool space = false;
  for (const auto& e : listed)
    if (e.keys == QKeySequence(Qt::Key_Space).toString(QKeySequence::NativeText) && e.where == QLatin1String("Iteration"))
      space = e.what.contains(QLatin1String("play"));
  EXPECT_TRUE(space) << "the Iteration page's Space is listed with what it does";
}


// The keys a page handles itself (the quiz's select-then-Enter, the ring's arrows) are listed:
// every key a page accepts is in Help's list with that page's name, so the list cannot drift.
TEST(MainWindowPolish, HelpListsTheKeysEveryPageHandles) {
  QTemporaryDir data;  // answering with a key saves quiz progress: not into the learner's own
  ASSERT_TRUE(data.isValid());
  qputenv("DPVIZ_DATA_DIR", data.path().toUtf8());
  PolishWindow w;
  const QList<MainWindow::ShortcutEntry> listed = w.window->shortcuts();
  auto listedOn = [&](const QString& where, Qt::Key key) {
    const QString name = QKeySequence(key).toString(QKeySequence::NativeText);
    for (const auto& e : listed)
      if (e.where == where && e.keys.split(QStringLiteral(", ")).contains(name) && !e.what.isEmpty()) return true;
    return false;
  };
  for (Qt::Key key : {Qt::Key_A, Qt::Key_B, Qt::Key_C, Qt::Key_D, Qt::Key_Return, Qt::Key_Enter})
    EXPECT_TRUE(listedOn(QStringLiteral("Quiz"), key)) << QKeySequence(key).toString().toStdString();
  for (Qt::Key key : {Qt::Key_Left, Qt::Key_Right, Qt::Key_Home, Qt::Key_End})
    EXPECT_TRUE(listedOn(QStringLiteral("Ring all-reduce"), key)) << QKeySequence(key).toString().toStdString();

  QList<Qt::Key> candidates{Qt::Key_Space, Qt::Key_Return, Qt::Key_Enter, Qt::Key_Left, Qt::Key_Right, Qt::Key_Up,
                            Qt::Key_Down, Qt::Key_Home, Qt::Key_End, Qt::Key_Backspace, Qt::Key_Escape, Qt::Key_Tab};
  for (int k = Qt::Key_0; k <= Qt::Key_9; ++k) candidates << static_cast<Qt::Key>(k);
  for (int k = Qt::Key_A; k <= Qt::Key_Z; ++k) candidates << static_cast<Qt::Key>(k);
  const QStringList titles{"Introduction", "Iteration", "BatchNorm lab", "Timeline", "Ring all-reduce", "DP vs DDP", "Memory", "Network", "Quiz"};
  ASSERT_EQ(titles.size(), MainWindow::pageIds().size());
  for (int i = 0; i < MainWindow::pageIds().size(); ++i) {
    const QString id = MainWindow::pageIds()[i];
    w.window->showPage(id);
    Page* page = w.window->page(id);
    int handled = 0;
    for (Qt::Key key : candidates) {
      QKeyEvent press(QEvent::KeyPress, key, Qt::NoModifier, QKeySequence(key).toString().toLower());
      press.ignore();
      // To the page alone: a key it leaves is passed up to the scroll area, which scrolls with arrows.
      static_cast<QObject*>(page)->event(&press);
      if (!press.isAccepted()) continue;
      ++handled;
      bool found = false;
      const QString name = QKeySequence(key).toString(QKeySequence::NativeText);
      for (const auto& e : listed)
        if (e.where == titles[i] && e.keys.split(QStringLiteral(", ")).contains(name) && !e.what.isEmpty()) found = true;
      EXPECT_TRUE(found) << id.toStdString() << " handles " << name.toStdString() << " but Help does not list it";
    }
    if (id == QLatin1String("quiz")) { EXPECT_GE(handled, 12) << "A-F, 1-6, Enter, H, Left"; }
    if (id == QLatin1String("ring")) { EXPECT_GE(handled, 4); }
  }
  qunsetenv("DPVIZ_DATA_DIR");
}

}  // namespace
}  // namespace gui
