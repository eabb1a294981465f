#pragma once
// State shared by the pages of the main window: the settings bar's values, where the lessons are,
// and requests to move between pages. Lives on the GUI thread.
#include <QMetaType>
#include <QObject>
#include <QString>

#include "gui/runtime/settings.h"

namespace gui {

class EngineController;

class AppContext : public QObject {
  Q_OBJECT
 public:
  explicit AppContext(QObject* parent = nullptr);
  const AppSettings& settings() const { return settings_; }
  void setSettings(const AppSettings& settings);  // emits settingsChanged when something changed
  // The lessons/ folder: $DPVIZ_LESSONS, else beside the executable (../share/dpviz/lessons or
  // ../lessons), else the source tree's lessons/.
  QString lessonsDir() const;
  // The user's data folder (QStandardPaths::AppDataLocation), created on demand; $DPVIZ_DATA_DIR overrides.
  QString dataDir() const;

  // The engine on its worker thread (gui/runtime/engine_controller.h), shared by the pages: it holds the
  // current iteration's recorded StageEvents and the last finished iteration's (Timeline page).
  // Set by whoever creates the pages (the main window, or a test); may be null. The engine then
  // follows this context's settings: the current ones are applied at once, later ones as they change.
  EngineController* engine() const { return engine_; }
  void setEngine(EngineController* engine);
  // "light" or "dark": the theme in effect (pages with custom drawing read it).
  QString theme() const { return theme_; }
  void setTheme(const QString& theme);  // emits themeChanged when it changed

 signals:
  void settingsChanged(const AppSettings& settings);
  // Page ids: "intro", "iteration", "bnlab", "timeline", "ring", "compare", "quiz".
  void navigateRequested(const QString& pageId);
  // Shown in the main window's status area (plain words) while page `pageId` is shown; a message
  // for a page in the background waits until that page is shown. An empty id: whatever page is shown.
  void statusMessage(const QString& pageId, const QString& text);
  void themeChanged(const QString& theme);
  // The BatchNorm lab is to train `devices` devices on batches of `batchSize` (a quiz question's
  // settings); the lab's other controls stay as they are.
  void labSettingsRequested(int devices, int batchSize);

 private:
  AppSettings settings_;
  EngineController* engine_ = nullptr;
  QString theme_ = QStringLiteral("light");
};

}  // namespace gui
