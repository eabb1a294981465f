#pragma once
// Helpers for the offscreen GUI tests: wait on the event loop for a condition (the engine answers
// on its own thread), and a page fixture with a context and an engine.
#include <gtest/gtest.h>

#include <QSet>
#include <QTest>
#include <functional>
#include <memory>
#include <set>

#include "gui/common/context.h"
#include "gui/app/main_window.h"
#include "gui/iteration/page.h"
#include "gui/iteration/scene.h"
#include "gui/runtime/engine_controller.h"

namespace gui {

// Runs the event loop until `condition` holds or `ms` passed; returns whether it holds.
inline bool waitUntil(const std::function<bool()>& condition, int ms = 60000) { return QTest::qWaitFor(condition, ms); }

// Runs what is already queued on the GUI thread (layout requests, resize and show events, queued
// calls, zero-time timers) and what that queues in turn, for a bounded number of rounds, without
// waiting for time to pass: the layouts are settled before a test measures them.
inline void settleEvents(int rounds = 8) {
  for (int i = 0; i < rounds; ++i) QCoreApplication::processEvents(QEventLoop::AllEvents);  // posted events too
}

inline AppSettings settingsFor(const QString& devices, const QString& preset, int batch, bool sync = false) {
  AppSettings s;
  s.devices = devices;
  s.preset = preset;
  s.batchSize = batch;
  s.syncBatchNorm = sync;
  return s;
}

// A whole main window of the given size (after construction: the window may be larger than the
// offscreen screen), light theme unless told, nothing saved.
struct SizedWindow {
  AppContext context;
  EngineController* engine = new EngineController();  // owned by the window
  std::unique_ptr<MainWindow> window;
  SizedWindow(const AppSettings& settings, QSize size, const QString& theme = QStringLiteral("light")) {
    context.setSettings(settings);
    MainWindow::Options options;
    options.persistent = false;
    options.theme = theme;
    window = std::make_unique<MainWindow>(&context, engine, options);
    engine->setParent(window.get());
    window->resize(size);  // after construction: the window may be larger than the offscreen screen
    window->show();
  }
  IterationPage* iteration() const { return qobject_cast<IterationPage*>(window->page(QStringLiteral("iteration"))); }
};

// The chip roles a device holds in a snapshot, as the scene groups them: one per part of memory.
inline std::set<dpv::TensorRole> snapshotRoles(const dpv::DeviceState& d) {
  std::set<dpv::TensorRole> roles;
  for (const auto& t : d.tensors) roles.insert(chipRoleFor(t.memory));  // one chip per part of memory
  return roles;
}

inline std::set<dpv::TensorRole> sceneRoles(IterationScene* scene, int device) {
  std::set<dpv::TensorRole> roles;
  for (ChipItem* chip : scene->chipsOn(device)) roles.insert(chip->view().role);
  return roles;
}

class IterationPageTest : public ::testing::Test {
 protected:
  void start(const AppSettings& settings) {
    context_ = std::make_unique<AppContext>();
    engine_ = std::make_unique<EngineController>();
    context_->setSettings(settings);
    context_->setEngine(engine_.get());
    page_ = std::make_unique<IterationPage>(context_.get());
    page_->resize(1200, 760);
    page_->show();
    page_->setSpeed(0);  // no animation: each step shows its state at once
    ASSERT_TRUE(waitUntil([&] { return engine_->hasIteration() && !engine_->busy(); })) << "the engine never announced an iteration (busy " << engine_->busy() << ", has iteration " << engine_->hasIteration() << ", error: " << engine_->lastError().toStdString() << ")";
  }
  // One step; waits until the page shows stage `expected` (or the engine failed).
  bool stepTo(int expected) {
    page_->stepForward();
    return waitUntil([&] { return !page_->waitingForEngine() && (page_->cursor() == expected || !page_->errorText().isEmpty()); });
  }
  void TearDown() override {
    page_.reset();
    engine_.reset();
    context_.reset();
  }
  std::unique_ptr<AppContext> context_;
  std::unique_ptr<EngineController> engine_;
  std::unique_ptr<IterationPage> page_;
};

}  // namespace gui
