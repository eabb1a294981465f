// How long does the GUI thread stall while the BatchNorm lab trains? A 1 ms QTimer records the
// gaps between its ticks while the page trains both models (and the reference) as fast as the
// devices go, with the charts updating live. Prints the longest gap and percentiles.
// Usage: bnlab_stall_bench [--devices cpu:4] [--batch 64] [--seconds 5] [--size 1280x800]
// Runs offscreen unless QT_QPA_PLATFORM is set.
//
// On a loaded machine the gaps also hold time the GUI thread waited for a CPU, so the benchmark
// also prints the heaviest single event the GUI thread handled, in wall time and in the thread's
// own CPU time (what the page's code costs, whatever else the machine is doing).
#include <QApplication>
#include <QElapsedTimer>
#include <QMap>
#include <QThread>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <vector>

#include "gui/common/context.h"
#include "gui/bnlab/charts.h"
#include "gui/bnlab/page.h"

using namespace gui;  // this file only holds main() and its helpers

namespace {

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Times every top-level event the GUI thread dispatches.
class TimingApplication : public QApplication {
 public:
  using QApplication::QApplication;
  bool measuring = false;
  double heaviestWallMs = 0, heaviestCpuMs = 0;
  QString heaviestWhat;
  QMap<QString, double> worstByKind;  // heaviest CPU time per kind of event
  bool notify(QObject* receiver, QEvent* event) override {
    // Other threads (the lab's worker, the device threads) dispatch through here too.
    if (QThread::currentThread() != thread()) return QApplication::notify(receiver, event);
    if (depth_++ > 0 || !measuring) {
      const bool r = QApplication::notify(receiver, event);
      --depth_;
      return r;
    }
    // Named before the dispatch: the receiver may delete itself while handling the event.
    const QString what = QStringLiteral("event type %1 to %2 %3")
                             .arg(int(event->type()))
                             .arg(QString::fromLatin1(receiver->metaObject()->className()), receiver->objectName());
    QElapsedTimer wall;
    wall.start();
    const double cpu0 = thread_cpu_ms();
    const bool r = QApplication::notify(receiver, event);
    const double cpu = thread_cpu_ms() - cpu0, w = wall.nsecsElapsed() / 1e6;
    --depth_;
    double& worst = worstByKind[what];
    worst = std::max(worst, cpu);
    if (cpu > heaviestCpuMs) {
      heaviestCpuMs = cpu;
      heaviestWallMs = w;
      heaviestWhat = what;
    }
    return r;
  }

 private:
  int depth_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  TimingApplication app(argc, argv);
  QString devices = QStringLiteral("cpu:4");
  int batch = 64, seconds = 5, width = 1280, height = 800;
  const QStringList args = app.arguments();
  for (int i = 1; i + 1 < args.size(); i += 2) {
    if (args[i] == QLatin1String("--devices")) devices = args[i + 1];
    else if (args[i] == QLatin1String("--batch")) batch = args[i + 1].toInt();
    else if (args[i] == QLatin1String("--seconds")) seconds = args[i + 1].toInt();
    else if (args[i] == QLatin1String("--size")) {
      const QStringList wh = args[i + 1].split(QLatin1Char('x'));
      if (wh.size() == 2) width = wh[0].toInt(), height = wh[1].toInt();
    } else {
      std::fprintf(stderr, "unknown option %s\n", qPrintable(args[i]));
      return 2;
    }
  }

  AppContext context;
  BatchNormLabPage page(&context);
  page.resize(width, height);
  page.show();
  BnLabConfig config = page.config();
  config.devices = devices.toStdString();
  config.batchSize = std::max(1, batch);
  config.classSorted = true;
  page.setStepsPerSecond(0);
  page.setStepLimit(10000);

  std::vector<double> gaps;  // ms between consecutive 1 ms ticks while training
  QElapsedTimer clock;
  double last = -1;
  QTimer probe;
  probe.setTimerType(Qt::PreciseTimer);
  probe.setInterval(1);
  QObject::connect(&probe, &QTimer::timeout, [&] {
    const double now = clock.nsecsElapsed() / 1e6;
    if (last >= 0 && page.isRunning()) gaps.push_back(now - last);
    last = now;
  });
  QObject::connect(&page, &BatchNormLabPage::labConfigured, &page, [&] {
    clock.start();
    probe.start();
    app.measuring = true;
    page.start();
    QTimer::singleShot(seconds * 1000, &app, [&] {
      app.measuring = false;
      page.pause();
      probe.stop();
      app.quit();
    });
  });
  QObject::connect(&page, &BatchNormLabPage::labFailed, &app, [&](const QString& message) {
    std::fprintf(stderr, "the lab stopped: %s\n", qPrintable(message));
    app.exit(1);
  });
  page.setConfig(config);
  const int rc = app.exec();
  if (rc != 0) return rc;
  if (gaps.empty()) {
    std::fprintf(stderr, "no timer ticks were recorded\n");
    return 1;
  }
  std::sort(gaps.begin(), gaps.end());
  auto pct = [&](double p) { return gaps[std::min(gaps.size() - 1, static_cast<size_t>(p * gaps.size()))]; };
  const double steps = static_cast<double>(page.charts()->stepCount());
  std::printf("bnlab_stall_bench: devices %s, batch %d, %dx%d, %d s\n", qPrintable(devices), batch, width, height, seconds);
  std::printf("  training steps     %.0f (%.1f steps/s, each step = %d models)\n", steps, steps / seconds, gui::kBnLabModelCount);
  std::printf("  GUI timer ticks    %zu\n", gaps.size());
  std::printf("  gap p50 / p99      %.2f ms / %.2f ms\n", pct(0.5), pct(0.99));
  std::printf("  longest GUI stall  %.2f ms (budget 16 ms: %s)\n", gaps.back(), gaps.back() <= 16.0 ? "within" : "OVER");
  std::printf("  heaviest event     %.2f ms GUI-thread CPU, %.2f ms wall (%s)\n", app.heaviestCpuMs,
              app.heaviestWallMs, qPrintable(app.heaviestWhat));
  QList<QPair<double, QString>> kinds;
  for (auto it = app.worstByKind.constBegin(); it != app.worstByKind.constEnd(); ++it) kinds.append({it.value(), it.key()});
  std::sort(kinds.begin(), kinds.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (int i = 0; i < std::min<int>(4, kinds.size()); ++i)
    std::printf("    %6.2f ms CPU  %s\n", kinds[i].first, qPrintable(kinds[i].second));
  std::printf("  machine load       %d CPU threads; a stall well above the heaviest event's CPU time is\n"
              "                     time the GUI thread waited for a CPU\n", QThread::idealThreadCount());
  return 0;
}
