#pragma once
// The main window: navigation list, settings bar, the pages, menus, status line; window state
// and settings remembered between runs (QSettings).
#include <QHash>
#include <QMainWindow>

#include "gui/common/context.h"

class QActionGroup;
class QDialog;
class QLabel;
class QListWidget;
class QPushButton;
class QStackedWidget;

namespace gui {

class EngineController;
class Page;
class SettingsBar;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  struct Options {
    bool persistent = true;       // read and write QSettings (off for --screenshot-all and tests)
    QString theme;                // "light", "dark", "system"; empty: the saved one (default system)
  };
  MainWindow(AppContext* context, EngineController* engine, const Options& options, QWidget* parent = nullptr);
  ~MainWindow() override;

  // Page ids in navigation order: intro, iteration, bnlab, timeline, ring, compare, memory, quiz.
  static QStringList pageIds();
  Page* page(const QString& id) const { return pages_.value(id); }
  QString currentPageId() const;
  void showPage(const QString& id);
  void setTheme(const QString& requested);  // light, dark, system
  SettingsBar* settingsBar() const { return settingsBar_; }
  // File > Export trace: the last iteration's StageEvents as Chrome trace JSON. Returns "" or the error.
  QString exportTrace(const QString& path) const;
  QString exportScreenshot(const QString& path);

  // Every keyboard shortcut of the window, read from its actions (menus), the pages' QShortcuts
  // and buttons with a shortcut: what Help > Keyboard shortcuts lists.
  struct ShortcutEntry {
    QString keys;   // "Ctrl+1", "Space"
    QString what;   // "Iteration", "play / pause"
    QString where;  // "everywhere", or the page's title
  };
  QList<ShortcutEntry> shortcuts() const;
  // Help > Keyboard shortcuts: a dialog (the caller owns it) sized to show its whole table.
  QDialog* createShortcutsDialog();
  QAction* exportTraceAction() const { return exportTrace_; }
  QPushButton* nextButton() const { return next_; }

 protected:
  void closeEvent(QCloseEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  void buildMenus();
  void addPage(const QString& id, const QString& title, const QString& icon, Page* page);
  void restoreState();
  void fitToScreen();  // shrinks the window to the screen's available area
  void saveState() const;
  void updateEngineStatus();
  void updateExportTrace();  // File > Export trace is enabled when there is a trace to export
  void onPageChanged(int index);
  void updateNextButton(int index);  // "Next: <page> →" (an arrow when the navigation is compact)
  // Below kCompactNavigationWidth the navigation shows its icons only (titles as tooltips), so
  // the pages get the width: the Iteration picture at 1024x640 above all.
  void setCompactNavigation(bool compact);
  QString pageTitle(int index) const { return titles_.value(index); }
  void onStatusMessage(const QString& pageId, const QString& text);
  void showShortcuts();
  void showAbout();

  AppContext* context_;
  EngineController* engine_;
  Options options_;
  QString requestedTheme_;
  QListWidget* nav_ = nullptr;
  QStackedWidget* stack_ = nullptr;
  SettingsBar* settingsBar_ = nullptr;
  QLabel* engineStatus_ = nullptr;
  QAction* exportTrace_ = nullptr;
  QPushButton* next_ = nullptr;  // "Next: <page> →" under the navigation
  QActionGroup* themeGroup_ = nullptr;
  QHash<QString, Page*> pages_;
  QHash<QString, QString> waitingStatus_;  // page id -> the message it sent while in the background
  QStringList order_;
  QStringList titles_;  // the pages' titles, in order_ (the navigation may show icons only)
  QWidget* navColumn_ = nullptr;
  bool compactNavigation_ = false;
};

}  // namespace gui
