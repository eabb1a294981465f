#include "gui/common/context.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>

#include "course/lessons.h"
#include "engine/error.h"
#include "gui/runtime/engine_controller.h"

namespace gui {

AppContext::AppContext(QObject* parent) : QObject(parent) {}

void AppContext::setSettings(const AppSettings& settings) {
  if (settings == settings_) return;
  settings_ = settings;
  emit settingsChanged(settings_);
}

void AppContext::setEngine(EngineController* engine) {
  if (engine == engine_) return;
  if (engine_) disconnect(this, &AppContext::settingsChanged, engine_, nullptr);
  engine_ = engine;
  if (!engine_) return;
  connect(this, &AppContext::settingsChanged, engine_, &EngineController::applySettings);
  engine_->applySettings(settings_);
}

void AppContext::setTheme(const QString& theme) {
  if (theme == theme_) return;
  theme_ = theme;
  emit themeChanged(theme_);
}

QString AppContext::lessonsDir() const {
  // One rule for the app, its tests and the installed copy (course/lessons.h). When nothing is
  // found the pages show the error of loading from the expected installed place.
  const std::string appDir = QCoreApplication::applicationDirPath().toStdString();
  try {
    return QString::fromStdString(dpv::course::find_lessons_dir(appDir));
  } catch (const dpv::Error&) {
    return QDir(QCoreApplication::applicationDirPath() + QStringLiteral("/../share/dpviz/lessons")).absolutePath();
  }
}

QString AppContext::dataDir() const {
  QString dir = qEnvironmentVariable("DPVIZ_DATA_DIR");
  if (dir.isEmpty()) dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
  if (dir.isEmpty()) dir = QDir::homePath() + QStringLiteral("/.local/share/dpviz");
  QDir().mkpath(dir);
  return dir;
}

}  // namespace gui
