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

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  initDpvizResources();
  registerEngineMetaTypes();
  const QString devices = argc > 1 ? QString::fromLocal8Bit(argv[1]) : QStringLiteral("cpu:8");
  const QString preset = argc > 2 ? QString::fromLocal8Bit(argv[2]) : QStringLiteral("mlp-bn");

  EngineController engine;
  AppSettings settings;
  settings.devices = devices;
  settings.preset = preset;
  settings.batchSize = 64;
  engine.applySettings(settings);

  IterationScene scene;
  SceneView view(&scene);
  view.resize(900, 640);
  Frames frameMs;
  std::vector<double> stalls;
  int iterations = 0;
  constexpr int kStallIterations = 20;
  QElapsedTimer tick;
  QTimer heartbeat;  // 1 ms timer on the GUI thread: the gaps between its ticks are the stalls
  heartbeat.setInterval(1);

  auto renderFrames = [&](const dpv::StageEvent* event) {
    scene.showState(sceneStateFor(engine.info(), event), false);
    QImage image(view.viewport()->size(), QImage::Format_ARGB32_Premultiplied);
    for (int i = 0; i < 5; ++i) {
      FrameTimer t;
      QPainter p(&image);
      view.render(&p);
      p.end();
      t.stop(frameMs);
    }
  };

  QObject::connect(&engine, &EngineController::iterationStarted, &app, [&](const IterationInfo& info) {
    if (iterations == 0) {
      scene.setInfo(info);
      view.fit();
      renderFrames(nullptr);
    }
  });
  QObject::connect(&engine, &EngineController::stageRecorded, &app, [&](const dpv::StageEvent& event) {
    if (iterations == 0) renderFrames(&event);
  });
  QObject::connect(&engine, &EngineController::engineError, &app, [&](const QString& message) {
    std::fprintf(stderr, "engine error: %s\n", qPrintable(message));
    app.exit(1);
  });
  QObject::connect(&heartbeat, &QTimer::timeout, &app, [&] {
    if (tick.isValid()) stalls.push_back(tick.nsecsElapsed() / 1e6);
    tick.restart();
  });
  QObject::connect(&engine, &EngineController::iterationCompleted, &app, [&] {
    ++iterations;
    if (iterations == 1) {
      heartbeat.start();  // phase 2: train on the worker while the GUI thread ticks
      tick.start();
    }
    if (iterations > kStallIterations) {
      heartbeat.stop();
      app.quit();
      return;
    }
    engine.requestIteration();
  });
  engine.requestIteration();
  int rc = app.exec();
  if (rc != 0) return rc;

  // Phase 3: the DDP view, 8 ranks, every stage of two iterations (the second has rebuilt buckets).
  Frames ddpFrameMs;
  {
    EngineController ddpEngine;
    AppSettings ddp = settings;
    ddp.ddp = true;
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
    rc = app.exec();
    if (rc != 0) return rc;
  }

  // Phase 4: the Ring page with as many ranks as devices, every frame of the ring scrubbed forward
  // and back: setFrame (the view's state and the side panels) and the whole page painted.
  Frames ringFrameMs, ringPageMs;
  {
    EngineController ringEngine;
    ringEngine.applySettings(settings);
    AppContext context;
    context.setEngine(&ringEngine);
    RingPage page(&context);
    page.resize(1280, 800);
    page.show();
    page.setPreset(preset);
    const int ranks = devices.section(QLatin1Char(':'), 1).toInt();
    page.setWorldSize(ranks > 1 ? ranks : 8);
    QObject::connect(&page, &RingPage::demoShown, &app, [&] { app.quit(); });
    QObject::connect(&page, &RingPage::failed, &app, [&](const QString& message) {
      std::fprintf(stderr, "ring page error: %s\n", qPrintable(message));
      app.exit(1);
    });
    page.run();
    rc = app.exec();
    if (rc != 0) return rc;
    // A step repaints the ring view; the side panels' text changes too (setFrame), and the page
    // around them only when Qt decides to repaint it, so the whole page is timed separately.
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

  auto stats = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    double sum = 0;
    for (double x : v) sum += x;
    struct { double mean, median, p95, max; } r{sum / v.size(), v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 95 / 100)], v.back()};
    return r;
  };
  auto report = [&](const char* what, const std::vector<double>& v, double target) {
    if (v.empty()) return;
    const auto w = stats(v);
    std::printf("%-36s n=%zu mean=%.3f ms median=%.3f ms p95=%.3f ms max=%.3f ms (target < %.0f ms)\n", what, v.size(),
                w.mean, w.median, w.p95, w.max, target);
  };
  auto report_frames = [&](const char* what, const Frames& f, double target) {
    if (f.wall.empty()) return;
    report(what, f.wall, target);
    const auto c = stats(f.cpu);
    std::printf("%-36s GUI thread CPU: median=%.3f ms p95=%.3f ms max=%.3f ms\n", "", c.median, c.p95, c.max);
  };
  std::printf("dpviz_frame_bench: %s, preset %s, batch 64, view 900x640, offscreen\n", qPrintable(devices), qPrintable(preset));
  report_frames("frame render (Iteration scene)", frameMs, 8);
  report("GUI thread gap while training", stalls, 16);
  report_frames("frame (DDP view, state + render)", ddpFrameMs, 8);
  report_frames("frame (Ring page: step + ring view)", ringFrameMs, 8);
  report_frames("Ring page, whole page repainted", ringPageMs, 8);
  return 0;
}
