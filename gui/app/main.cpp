// dpviz: the Qt 6 app that teaches torch.nn.DataParallel by running it.
//   dpviz                         the app
//   dpviz --screenshot-all DIR    every page (and the Iteration page at several stages) to PNG, then exit
//   --theme light|dark|system     --size WxH (default 1280x800)
#include <QApplication>
#include <QCommandLineParser>
#include <QRegularExpression>
#include <QTimer>
#include <cstdio>

#include "course/lessons.h"
#include "gui/common/context.h"
#include "gui/app/main_window.h"
#include "gui/app/screenshot_runner.h"
#include "gui/common/theme.h"
#include "gui/runtime/engine_controller.h"
#include "gui/runtime/engine_types.h"

using namespace gui;  // this file only holds main() and its helpers

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("dpviz"));
  QApplication::setOrganizationName(QStringLiteral("dpviz"));
  QApplication::setApplicationVersion(QStringLiteral(DPVIZ_VERSION));
  initDpvizResources();
  registerEngineMetaTypes();

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Teaches PyTorch's nn.DataParallel by running it, stage by stage."));
  parser.addHelpOption();
  parser.addVersionOption();
  QCommandLineOption shots(QStringLiteral("screenshot-all"), QStringLiteral("Render every page to PNG files in DIR and exit."), QStringLiteral("DIR"));
  QCommandLineOption theme(QStringLiteral("theme"), QStringLiteral("light, dark or system."), QStringLiteral("THEME"));
  QCommandLineOption size(QStringLiteral("size"), QStringLiteral("Window size WxH (default 1280x800)."), QStringLiteral("WxH"));
  QCommandLineOption devices(QStringLiteral("devices"), QStringLiteral("Device spec to start with, e.g. cpu:4."), QStringLiteral("SPEC"));
  parser.addOptions({shots, theme, size, devices});
  parser.process(app);

  QString themeName = parser.value(theme);
  if (!themeName.isEmpty() && themeName != QLatin1String("light") && themeName != QLatin1String("dark") && themeName != QLatin1String("system")) {
    std::fprintf(stderr, "dpviz: --theme must be light, dark or system (got '%s')\n", qPrintable(themeName));
    return 2;
  }
  QSize windowSize(1280, 800);
  if (parser.isSet(size)) {
    static const QRegularExpression wxh(QStringLiteral("^(\\d{3,5})x(\\d{3,5})$"));
    const auto m = wxh.match(parser.value(size));
    if (!m.hasMatch()) {
      std::fprintf(stderr, "dpviz: --size must look like 1280x800 (got '%s')\n", qPrintable(parser.value(size)));
      return 2;
    }
    windowSize = QSize(m.captured(1).toInt(), m.captured(2).toInt());
  }
  const bool screenshotMode = parser.isSet(shots);

  AppContext context;
  if (parser.isSet(devices)) {
    AppSettings s = context.settings();
    s.devices = parser.value(devices);
    context.setSettings(s);
  }
  EngineController engine;
  MainWindow::Options options;
  options.persistent = !screenshotMode;
  options.theme = screenshotMode && themeName.isEmpty() ? QStringLiteral("light") : themeName;
  MainWindow window(&context, &engine, options);
  if (screenshotMode || parser.isSet(size)) window.resize(windowSize);
  window.show();

  if (!screenshotMode) return app.exec();

  // Screenshots of pages without their lessons would look fine and teach nothing: a missing or
  // broken lesson fails the run (this is what the install test relies on).
  const std::vector<std::string> lessonProblems = dpv::course::check_lessons(context.lessonsDir().toStdString());
  ScreenshotRunner runner(&window, parser.value(shots));
  QObject::connect(&runner, &ScreenshotRunner::finished, &app, [&](bool ok) {
    for (const QString& path : runner.written()) std::printf("%s\n", qPrintable(path));
    for (const QString& problem : runner.problems()) std::fprintf(stderr, "dpviz: %s\n", qPrintable(problem));
    for (const std::string& problem : lessonProblems) std::fprintf(stderr, "dpviz: %s\n", problem.c_str());
    engine.shutdown();
    app.exit(ok && lessonProblems.empty() ? 0 : 1);
  });
  QTimer::singleShot(0, &runner, &ScreenshotRunner::start);
  return app.exec();
}
