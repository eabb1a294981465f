#pragma once
// The GUI-thread side of the engine: starts the EngineWorker on its own QThread, forwards requests
// to it as queued calls, and records what comes back (the current iteration's StageEvents and the
// last finished iteration's) so pages can replay and chart them. Replies that belong to older
// settings (a "generation") are dropped, so changing settings mid-iteration is always safe.
#include <QObject>
#include <QPointer>
#include <QVector>
#include <atomic>

#include "gui/runtime/engine_types.h"
#include "gui/runtime/settings.h"
#include "gui/runtime/engine_worker.h"
#include "gui/runtime/generation.h"
#include "gui/runtime/worker_thread.h"

namespace gui {


class EngineController : public QObject {
  Q_OBJECT
 public:
  explicit EngineController(QObject* parent = nullptr);
  ~EngineController() override;  // stops the worker thread (waits for the stage in progress)

  // Starts a new generation: what was recorded is cleared and the next request uses `settings`.
  void applySettings(const AppSettings& settings);

  void requestPrepare();    // announce the iteration (iterationStarted) without running a stage
  void requestStage();      // run the next stage (a new iteration after the last one)
  void requestIteration();  // run the rest of the current iteration (or a whole new one)
  quint64 requestSample(const AppSettings& settings);  // the seed's sample program; returns a request id

  bool busy() const { return pending_ > 0; }
  bool running() const { return thread_.running(); }
  quint64 generation() const { return generation_.current(); }
  const AppSettings& settings() const { return settings_; }
  const IterationInfo& info() const { return info_; }
  bool hasIteration() const { return hasInfo_; }
  // Events of the iteration in progress (or just finished), in plan order.
  const QVector<dpv::StageEvent>& events() const { return events_; }
  // The last iteration that ran to its end (empty until one has).
  const QVector<dpv::StageEvent>& lastCompleted() const { return lastCompleted_; }
  const IterationInfo& lastCompletedInfo() const { return lastCompletedInfo_; }
  QString lastError() const { return lastFailure_.message; }
  // The last error with its typed reason and site; set before engineError is emitted.
  const EngineFailure& lastFailure() const { return lastFailure_; }
  // Whether the last error came from running a stage of the PyTorch program (the engine raises what
  // PyTorch raises there) rather than from the app preparing it (devices, model, data).
  bool lastErrorInProgram() const { return lastFailure_.inProgram; }
  // loss.item() of every iteration of these settings so far, in order (the Loss stage's value).
  const QVector<double>& losses() const { return losses_; }
  bool iterationComplete() const { return hasInfo_ && !events_.isEmpty() && events_.size() == static_cast<int>(info_.plan.size()); }

  // Runs `job` (callable with no arguments, returning a value; it must not touch GUI objects) on
  // the engine's worker thread after the requests queued before it, then `done(value)` on the GUI
  // thread, unless `receiver` is gone by then. A long job should poll stopFlag() and return early
  // once it is set. Returns false (and runs nothing) when the engine has stopped. Used by the pages
  // whose engine work is one computation (the Ring and DP-vs-DDP pages).
  template <typename Job, typename Done>
  bool runJob(QObject* receiver, Job job, Done done) {
    if (stopping_ || !thread_.worker()) return false;
    QPointer<QObject> target(receiver);
    return QMetaObject::invokeMethod(
        thread_.worker(),
        [this, target, job = std::move(job), done = std::move(done)]() mutable {
          if (stopping_) return;
          auto value = job();
          // Delivered through the controller, which outlives the worker thread; the receiver may not.
          QMetaObject::invokeMethod(
              this,
              [target, done = std::move(done), value = std::move(value)]() mutable {
                if (target) done(std::move(value));
              },
              Qt::QueuedConnection);
        },
        Qt::QueuedConnection);
  }
  const std::atomic<bool>* stopFlag() const { return &stopping_; }

  // Stops the thread; later requests are ignored. Called by the destructor and on window close.
  void shutdown();

 signals:
  void settingsApplied(const AppSettings& settings);  // recorded state was cleared
  void iterationStarted(const IterationInfo& info);
  void stageRecorded(const dpv::StageEvent& event);
  void iterationCompleted();
  void engineError(const QString& message);  // dpv::Error::full(), plain words
  void sampleFinished(quint64 requestId, const QString& text, bool ok);
  void busyChanged(bool busy);

  // To the worker (queued).
  void configureWorker(const AppSettings& settings, quint64 generation);
  void prepareWorker(quint64 generation);
  void stageWorker(quint64 generation);
  void iterationWorker(quint64 generation);
  void sampleWorker(const AppSettings& settings, quint64 requestId);

 private:
  void onIterationStarted(const IterationInfo& info);
  void onStageFinished(quint64 generation, const dpv::StageEvent& event);
  void onFailed(quint64 generation, const gui::EngineFailure& failure);
  void onRequestDone(quint64 generation);
  void addPending();

  // Declared before the thread: the worker reads both until the thread has stopped.
  Generation generation_;  // of the settings; the worker skips requests of older ones
  std::atomic<bool> stopping_{false};
  WorkerThread<EngineWorker> thread_;
  Generation samples_;  // request ids of the sample program (the intro page keeps the latest)
  int pending_ = 0;
  AppSettings settings_;
  IterationInfo info_;
  bool hasInfo_ = false;
  QVector<dpv::StageEvent> events_;
  QVector<dpv::StageEvent> lastCompleted_;
  IterationInfo lastCompletedInfo_;
  EngineFailure lastFailure_;
  QVector<double> losses_;
};

}  // namespace gui
