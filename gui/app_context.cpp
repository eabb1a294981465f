#include "gui/app_context.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>

AppContext::AppContext(QObject* parent) : QObject(parent) {}

void AppContext::setSettings(const AppSettings& settings) {
  if (settings == settings_) return;
  settings_ = settings;
  emit settingsChanged(settings_);
}

void AppContext::setTheme(const QString& theme) {
  if (theme == theme_) return;
  theme_ = theme;
  emit themeChanged(theme_);
}

QString AppContext::lessonsDir() const {
  const QString fromEnv = qEnvironmentVariable("DPVIZ_LESSONS");
  if (!fromEnv.isEmpty()) return QDir(fromEnv).absolutePath();
  // Installed layouts first, then a build tree next to the sources.
  const QString appDir = QCoreApplication::applicationDirPath();
  for (const QString& candidate : {appDir + QStringLiteral("/../share/dpviz/lessons"), appDir + QStringLiteral("/../lessons")}) {
    if (QFileInfo(candidate + QStringLiteral("/intro.md")).exists()) return QDir(candidate).absolutePath();
  }
  return QDir(QStringLiteral(DPV_SOURCE_DIR "/lessons")).absolutePath();
}

QString AppContext::dataDir() const {
  QString dir = qEnvironmentVariable("DPVIZ_DATA_DIR");
  if (dir.isEmpty()) dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
  if (dir.isEmpty()) dir = QDir::homePath() + QStringLiteral("/.local/share/dpviz");
  QDir().mkpath(dir);
  return dir;
}
