#include "gui/runtime/engine_controller.h"

#include "gui/runtime/engine_worker.h"

namespace gui {

EngineController::EngineController(QObject* parent) : QObject(parent) {
  registerEngineMetaTypes();
  thread_.setObjectName(QStringLiteral("dpviz engine"));
  worker_ = new EngineWorker(&latest_, &stopping_);
  worker_->moveToThread(&thread_);
  // The worker is deleted on its own thread when the thread's event loop ends.
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);

  connect(this, &EngineController::configureWorker, worker_, &EngineWorker::configure);
  connect(this, &EngineController::prepareWorker, worker_, &EngineWorker::prepare);
  connect(this, &EngineController::stageWorker, worker_, &EngineWorker::runStage);
  connect(this, &EngineController::iterationWorker, worker_, &EngineWorker::runIteration);
  connect(this, &EngineController::sampleWorker, worker_, &EngineWorker::runSample);

  connect(worker_, &EngineWorker::iterationStarted, this, &EngineController::onIterationStarted);
  connect(worker_, &EngineWorker::stageFinished, this, &EngineController::onStageFinished);
  connect(worker_, &EngineWorker::failed, this, &EngineController::onFailed);
  connect(worker_, &EngineWorker::requestDone, this, &EngineController::onRequestDone);
  connect(worker_, &EngineWorker::sampleFinished, this, &EngineController::sampleFinished);
  thread_.start();
}

EngineController::~EngineController() { shutdown(); }

void EngineController::shutdown() {
  if (stopping_.exchange(true)) return;
  // Requests still queued see `stopping_` and return at once; the stage in progress finishes.
  thread_.quit();
  thread_.wait();
  worker_ = nullptr;
  if (pending_ != 0) {
    pending_ = 0;
    emit busyChanged(false);
  }
}

void EngineController::follow(AppContext* context) {
  connect(context, &AppContext::settingsChanged, this, &EngineController::applySettings);
  applySettings(context->settings());
}

void EngineController::applySettings(const AppSettings& settings) {
  if (stopping_) return;
  settings_ = settings;
  ++generation_;
  latest_.store(generation_);
  hasInfo_ = false;
  info_ = IterationInfo{};
  events_.clear();
  lastCompleted_.clear();
  lastCompletedInfo_ = IterationInfo{};
  lastError_.clear();
  addPending();
  emit configureWorker(settings_, generation_);
  emit settingsApplied(settings_);
}

void EngineController::addPending() {
  if (pending_++ == 0) emit busyChanged(true);
}

void EngineController::requestPrepare() {
  if (stopping_ || generation_ == 0) return;
  addPending();
  emit prepareWorker(generation_);
}

void EngineController::requestStage() {
  if (stopping_ || generation_ == 0) return;
  addPending();
  emit stageWorker(generation_);
}

void EngineController::requestIteration() {
  if (stopping_ || generation_ == 0) return;
  addPending();
  emit iterationWorker(generation_);
}

quint64 EngineController::requestSample(const AppSettings& settings) {
  const quint64 id = ++nextSampleId_;
  if (!stopping_) emit sampleWorker(settings, id);
  return id;
}

void EngineController::onIterationStarted(const IterationInfo& info) {
  if (info.generation != generation_) return;
  info_ = info;
  hasInfo_ = true;
  events_.clear();
  lastError_.clear();
  emit iterationStarted(info_);
}

void EngineController::onStageFinished(quint64 generation, const dpv::StageEvent& event) {
  if (generation != generation_ || !hasInfo_) return;
  events_.append(event);
  emit stageRecorded(event);
  if (iterationComplete()) {
    lastCompleted_ = events_;
    lastCompletedInfo_ = info_;
    emit iterationCompleted();
  }
}

void EngineController::onFailed(quint64 generation, const QString& message) {
  if (generation != generation_) return;
  lastError_ = message;
  emit engineError(message);
}

void EngineController::onRequestDone(quint64) {
  if (pending_ > 0 && --pending_ == 0) emit busyChanged(false);
}

}  // namespace gui
