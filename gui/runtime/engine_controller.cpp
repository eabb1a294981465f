#include "gui/runtime/engine_controller.h"

#include "gui/runtime/engine_worker.h"

namespace gui {

EngineController::EngineController(QObject* parent)
    : QObject(parent), thread_(QStringLiteral("dpviz engine"), &generation_, &stopping_) {
  registerEngineMetaTypes();
  EngineWorker* worker = thread_.worker();
  connect(this, &EngineController::configureWorker, worker, &EngineWorker::configure);
  connect(this, &EngineController::prepareWorker, worker, &EngineWorker::prepare);
  connect(this, &EngineController::stageWorker, worker, &EngineWorker::runStage);
  connect(this, &EngineController::iterationWorker, worker, &EngineWorker::runIteration);
  connect(this, &EngineController::sampleWorker, worker, &EngineWorker::runSample);

  connect(worker, &EngineWorker::iterationStarted, this, &EngineController::onIterationStarted);
  connect(worker, &EngineWorker::stageFinished, this, &EngineController::onStageFinished);
  connect(worker, &EngineWorker::failed, this, &EngineController::onFailed);
  connect(worker, &EngineWorker::requestDone, this, &EngineController::onRequestDone);
  connect(worker, &EngineWorker::sampleFinished, this, &EngineController::sampleFinished);
  thread_.start();
}

EngineController::~EngineController() { shutdown(); }

void EngineController::shutdown() {
  if (stopping_.exchange(true)) return;
  // Requests still queued see `stopping_` and return at once; the stage in progress finishes.
  thread_.stop();
  if (pending_ != 0) {
    pending_ = 0;
    emit busyChanged(false);
  }
}

void EngineController::applySettings(const AppSettings& settings) {
  if (stopping_) return;
  settings_ = settings;
  const quint64 generation = generation_.next();
  hasInfo_ = false;
  info_ = IterationInfo{};
  events_.clear();
  lastCompleted_.clear();
  lastCompletedInfo_ = IterationInfo{};
  lastFailure_ = {};
  losses_.clear();
  addPending();
  emit configureWorker(settings_, generation);
  emit settingsApplied(settings_);
}

void EngineController::addPending() {
  if (pending_++ == 0) emit busyChanged(true);
}

void EngineController::requestPrepare() {
  if (stopping_ || generation_.current() == 0) return;
  addPending();
  emit prepareWorker(generation_.current());
}

void EngineController::requestStage() {
  if (stopping_ || generation_.current() == 0) return;
  addPending();
  emit stageWorker(generation_.current());
}

void EngineController::requestIteration() {
  if (stopping_ || generation_.current() == 0) return;
  addPending();
  emit iterationWorker(generation_.current());
}

quint64 EngineController::requestSample(const AppSettings& settings) {
  const quint64 id = samples_.next();
  if (!stopping_) emit sampleWorker(settings, id);
  return id;
}

void EngineController::onIterationStarted(const IterationInfo& info) {
  if (!generation_.isCurrent(info.generation)) return;
  info_ = info;
  hasInfo_ = true;
  events_.clear();
  lastFailure_ = {};
  emit iterationStarted(info_);
}

void EngineController::onStageFinished(quint64 generation, const dpv::StageEvent& event) {
  if (!generation_.isCurrent(generation) || !hasInfo_) return;
  events_.append(event);
  if (event.loss) losses_.append(*event.loss);
  emit stageRecorded(event);
  if (iterationComplete()) {
    lastCompleted_ = events_;
    lastCompletedInfo_ = info_;
    emit iterationCompleted();
  }
}

void EngineController::onFailed(quint64 generation, const EngineFailure& failure) {
  if (!generation_.isCurrent(generation)) return;
  lastFailure_ = failure;
  emit engineError(failure.message);
}

void EngineController::onRequestDone(quint64) {
  if (pending_ > 0 && --pending_ == 0) emit busyChanged(false);
}

}  // namespace gui
