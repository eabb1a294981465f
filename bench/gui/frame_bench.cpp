// dpviz_frame_bench: prints (1) the time to render one frame of the Iteration scene with 8
// devices offscreen, per stage, (2) the GUI thread's longest stall while the engine trains on its
// worker thread, and (3) the frame time of the DDP view with 8 ranks over two DDP iterations
// (building the state from the snapshot and drawing it), and (4) the frame time of the Ring page
// with 8 ranks while a learner scrubs through every step (the step's state and side panels, and
// the ring view painted; the whole page's repaint apart). Frames print their wall time and the GUI
// thread's CPU time (the work, without the waits for a CPU on a loaded machine). Targets: < 8 ms
// per frame, no stall over 16 ms. Figures only, no pass/fail.
#include <QApplication>
#include <QElapsedTimer>
#include <QImage>
#include <QPainter>
#include <QTimer>
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <vector>

#include "gui/common/context.h"
#include "gui/common/theme.h"
#include "gui/ddp/scene.h"
#include "gui/iteration/scene.h"
#include "gui/ring/page.h"
#include "gui/ring/ring_view.h"
#include "gui/runtime/engine_controller.h"
#include "gui/runtime/engine_types.h"

using namespace gui;  // this file only holds main() and its helpers

namespace {

// Wall time and the GUI thread's own CPU time of one frame. On a loaded machine (other builds on
// the two cores) the wall time holds the waits for a CPU; the thread's CPU time is the frame's work.
struct Frames {
  std::vector<double> wall, cpu;
};

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

class FrameTimer {
 public:
  FrameTimer() { restart(); }
  void restart() {
    wall_.start();
    cpu_ = thread_cpu_ms();
  }
  void stop(Frames& into) const {
    into.wall.push_back(wall_.nsecsElapsed() / 1e6);
    into.cpu.push_back(thread_cpu_ms() - cpu_);
  }

 private:
  QElapsedTimer wall_;
  double cpu_ = 0;
};

// The engine's settings every phase starts from: the devices and preset from the command line.
AppSettings benchSettings(const QString& devices, const QString& preset) {
  AppSettings settings;
  settings.devices = devices;
  settings.preset = preset;
  settings.batchSize = 64;
  return settings;
}

// Phases 1 and 2: the Iteration scene rendered at every stage of the first iteration, then the GUI
// thread's stalls over kStallIterations more while the engine trains on its worker thread. A class
// rather than a function so that its engine, scene and view live to the end of main(), as they
// did when all of this was main()'s body: the later phases run beside them.
class IterationPhase {
 public:
  IterationPhase(QApplication& app, const AppSettings& settings) : app_(app), view_(&scene_) {
    engine_.applySettings(settings);
    view_.resize(900, 640);
    heartbeat_.setInterval(1);
    connectEngine();
    QObject::connect(&heartbeat_, &QTimer::timeout, &app_, [this] {
      if (tick_.isValid()) stalls.push_back(tick_.nsecsElapsed() / 1e6);
      tick_.restart();
    });
  }

  int run() {
    engine_.requestIteration();
    return app_.exec();
  }

  Frames frameMs;
  std::vector<double> stalls;

 private:
  static constexpr int kStallIterations = 20;

  void renderFrames(const dpv::StageEvent* event) {
    scene_.showState(sceneStateFor(engine_.info(), event), false);
    QImage image(view_.viewport()->size(), QImage::Format_ARGB32_Premultiplied);
    for (int i = 0; i < 5; ++i) {
      FrameTimer t;
      QPainter p(&image);
      view_.render(&p);
      p.end();
      t.stop(frameMs);
    }
  }

  void connectEngine() {
    QObject::connect(&engine_, &EngineController::iterationStarted, &app_, [this](const IterationInfo& info) {
      if (iterations_ == 0) {
        scene_.setInfo(info);
        view_.fit();
        renderFrames(nullptr);
      }
    });
    QObject::connect(&engine_, &EngineController::stageRecorded, &app_, [this](const dpv::StageEvent& event) {
      if (iterations_ == 0) renderFrames(&event);
    });
    QObject::connect(&engine_, &EngineController::engineError, &app_, [this](const QString& message) {
      std::fprintf(stderr, "engine error: %s\n", qPrintable(message));
      app_.exit(1);
    });
    QObject::connect(&engine_, &EngineController::iterationCompleted, &app_, [this] { onIterationCompleted(); });
  }

  void onIterationCompleted() {
    ++iterations_;
    if (iterations_ == 1) {
      heartbeat_.start();  // phase 2: train on the worker while the GUI thread ticks
      tick_.start();
    }
    if (iterations_ > kStallIterations) {
      heartbeat_.stop();
      app_.quit();
      return;
    }
    engine_.requestIteration();
  }

  QApplication& app_;
  EngineController engine_;
  IterationScene scene_;
  SceneView view_;
  int iterations_ = 0;
  QElapsedTimer tick_;
  QTimer heartbeat_;  // 1 ms timer on the GUI thread: the gaps between its ticks are the stalls
};

// Phase 3: the DDP view, 8 ranks, every stage of two iterations (the second has rebuilt buckets).
int runDdpPhase(QApplication& app, const AppSettings& settings, Frames& ddpFrameMs) {
  EngineController ddpEngine;
  AppSettings ddp = settings;
  ddp.strategy = dpv::StrategyKind::DistributedDataParallel;
  ddpEngine.applySettings(ddp);
  DdpScene ddpScene;
  SceneView ddpView(&ddpScene);
  ddpView.resize(900, 640);
  int done = 0;
  auto renderDdp = [&](const dpv::StageEvent* event) {
    QImage image(ddpView.viewport()->size(), QImage::Format_ARGB32_Premultiplied);
    for (int i = 0; i < 5; ++i) {
      FrameTimer t;
      ddpScene.showState(ddpSceneStateFor(ddpEngine.info(), event));  // a new stage is a rebuild and a paint
      QPainter p(&image);
      ddpView.render(&p);
      p.end();
      t.stop(ddpFrameMs);
    }
  };
  QObject::connect(&ddpEngine, &EngineController::iterationStarted, &app, [&](const IterationInfo& info) {
    ddpScene.setInfo(info);
    ddpView.fit();
    renderDdp(nullptr);
  });
  QObject::connect(&ddpEngine, &EngineController::stageRecorded, &app, [&](const dpv::StageEvent& event) { renderDdp(&event); });
  QObject::connect(&ddpEngine, &EngineController::engineError, &app, [&](const QString& message) {
    std::fprintf(stderr, "DDP engine error: %s\n", qPrintable(message));
    app.exit(1);
  });
  QObject::connect(&ddpEngine, &EngineController::iterationCompleted, &app, [&] {
    if (++done >= 2) return app.quit();
    ddpEngine.requestIteration();
  });
  ddpEngine.requestIteration();
  return app.exec();
}

// Phase 4, timing: every frame of the ring scrubbed forward and back. A step repaints the ring
// view; the side panels' text changes too (setFrame), and the page around them only when Qt
// decides to repaint it, so the whole page is timed separately.
void scrubRingPage(RingPage& page, Frames& ringFrameMs, Frames& ringPageMs) {
  QImage viewImage(page.view()->size(), QImage::Format_ARGB32_Premultiplied);
  QImage pageImage(page.size(), QImage::Format_ARGB32_Premultiplied);
  for (int pass = 0; pass < 2; ++pass)
    for (int k = 0; k < page.frameCount(); ++k) {
      const int f = pass == 0 ? k : page.frameCount() - 1 - k;
      FrameTimer t;
      page.setFrame(f);
      QPainter p(&viewImage);
      page.view()->render(&p);
      p.end();
      t.stop(ringFrameMs);
      t.restart();
      QPainter whole(&pageImage);
      page.render(&whole);
      whole.end();
      t.stop(ringPageMs);
    }
}

// Phase 4: the Ring page with as many ranks as devices, every frame of the ring scrubbed forward
// and back: setFrame (the view's state and the side panels) and the whole page painted.
int runRingPhase(QApplication& app, const AppSettings& settings, Frames& ringFrameMs, Frames& ringPageMs) {
  EngineController ringEngine;
  ringEngine.applySettings(settings);
  AppContext context;
  context.setEngine(&ringEngine);
  RingPage page(&context);
  page.resize(1280, 800);
  page.show();
  page.setPreset(settings.preset);
  const int ranks = settings.devices.section(QLatin1Char(':'), 1).toInt();
  page.setWorldSize(ranks > 1 ? ranks : 8);
  QObject::connect(&page, &RingPage::demoShown, &app, [&] { app.quit(); });
  QObject::connect(&page, &RingPage::failed, &app, [&](const QString& message) {
    std::fprintf(stderr, "ring page error: %s\n", qPrintable(message));
    app.exit(1);
  });
  page.run();
  const int rc = app.exec();
  if (rc != 0) return rc;
  scrubRingPage(page, ringFrameMs, ringPageMs);
  return 0;
}

struct Stats {
  double mean, median, p95, max;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  return {sum / v.size(), v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 95 / 100)], v.back()};
}

void report(const char* what, const std::vector<double>& v, double target) {
  if (v.empty()) return;
  const auto w = stats(v);
  std::printf("%-36s n=%zu mean=%.3f ms median=%.3f ms p95=%.3f ms max=%.3f ms (target < %.0f ms)\n", what, v.size(),
              w.mean, w.median, w.p95, w.max, target);
}

void reportFrames(const char* what, const Frames& f, double target) {
  if (f.wall.empty()) return;
  report(what, f.wall, target);
  const auto c = stats(f.cpu);
  std::printf("%-36s GUI thread CPU: median=%.3f ms p95=%.3f ms max=%.3f ms\n", "", c.median, c.p95, c.max);
}

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  initDpvizResources();
  registerEngineMetaTypes();
  const QString devices = argc > 1 ? QString::fromLocal8Bit(argv[1]) : QStringLiteral("cpu:8");
  const QString preset = argc > 2 ? QString::fromLocal8Bit(argv[2]) : QStringLiteral("mlp-bn");
  const AppSettings settings = benchSettings(devices, preset);

  IterationPhase iteration(app, settings);
  int rc = iteration.run();
  if (rc != 0) return rc;
  Frames ddpFrameMs;
  rc = runDdpPhase(app, settings, ddpFrameMs);
  if (rc != 0) return rc;
  Frames ringFrameMs, ringPageMs;
  rc = runRingPhase(app, settings, ringFrameMs, ringPageMs);
  if (rc != 0) return rc;

  std::printf("dpviz_frame_bench: %s, preset %s, batch 64, view 900x640, offscreen\n", qPrintable(devices), qPrintable(preset));
  reportFrames("frame render (Iteration scene)", iteration.frameMs, 8);
  report("GUI thread gap while training", iteration.stalls, 16);
  reportFrames("frame (DDP view, state + render)", ddpFrameMs, 8);
  reportFrames("frame (Ring page: step + ring view)", ringFrameMs, 8);
  reportFrames("Ring page, whole page repainted", ringPageMs, 8);
  return 0;
}
