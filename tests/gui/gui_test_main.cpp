// Entry point of dpv_gui_tests: an offscreen QApplication for every test, with settings and data
// written to a temporary folder so tests never touch the user's files.
#include <gtest/gtest.h>

#include <QApplication>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>

#include "gui/common/theme.h"
#include "gui/runtime/engine_types.h"

using namespace gui;  // this file only holds main() and its helpers

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");  // before the QApplication: no display needed
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("dpviz-tests"));
  QApplication::setOrganizationName(QStringLiteral("dpviz-tests"));
  QStandardPaths::setTestModeEnabled(true);
  QTemporaryDir settingsDir;
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, settingsDir.path());
  qputenv("DPVIZ_DATA_DIR", settingsDir.filePath(QStringLiteral("data")).toUtf8());
  initDpvizResources();
  registerEngineMetaTypes();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
