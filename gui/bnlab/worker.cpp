#include "gui/bnlab/worker.h"

#include <QTimer>
#include <algorithm>
#include <exception>

#include "engine/error.h"
#include "course/bnlab_session.h"

namespace gui {

BnLabWorker::BnLabWorker(QObject* parent) : QObject(parent), timer_(new QTimer(this)) {
  // A child of the worker, so it moves to the worker's thread with it.
  connect(timer_, &QTimer::timeout, this, &BnLabWorker::tick);
}

BnLabWorker::~BnLabWorker() = default;

void BnLabWorker::registerTypes() {
  qRegisterMetaType<BnLabConfig>("BnLabConfig");
  qRegisterMetaType<BnLabUpdate>("BnLabUpdate");
  qRegisterMetaType<BnLabInfo>("BnLabInfo");
}

int BnLabWorker::timerInterval() const { return stepsPerSecond_ > 0 ? 1000 / stepsPerSecond_ : 0; }

void BnLabWorker::configure(const BnLabConfig& config, quint64 generation) {
  timer_->stop();
  pending_.clear();
  session_.reset();  // the old devices' threads end here, before the new set starts its own
  generation_ = generation;
  stopReported_ = {};
  setRunning(false);
  try {
    session_ = std::make_unique<dpv::course::BnLabSession>(config);
  } catch (const dpv::Error& e) {
    emit failed(QStringLiteral("setup"), QString::fromStdString(e.full()), generation_);
    return;
  } catch (const std::exception& e) {
    emit failed(QStringLiteral("setup"), QString::fromStdString(e.what()), generation_);
    return;
  }
  BnLabInfo info;
  info.generation = generation_;
  for (const auto& label : session_->deviceLabels()) info.deviceLabels << QString::fromStdString(label);
  const auto [model, error] = session_->probeFirstStep();
  info.probeModel = QString::fromStdString(model);
  info.probeError = QString::fromStdString(error);
  emit configured(info);
}

void BnLabWorker::setBatchSize(qint64 rows, quint64 generation) {
  if (!session_ || generation != generation_) return;  // a session since replaced takes no settings
  try {
    session_->setBatchSize(rows);
  } catch (const dpv::Error& e) {
    emit failed(QStringLiteral("settings"), QString::fromStdString(e.full()), generation_);
  }
}

void BnLabWorker::setLearningRate(double lr, quint64 generation) {
  if (!session_ || generation != generation_) return;
  try {
    session_->setLearningRate(lr);
  } catch (const dpv::Error& e) {
    emit failed(QStringLiteral("settings"), QString::fromStdString(e.full()), generation_);
  }
}

void BnLabWorker::start() {
  const bool refused = !session_ || session_->failed() || (stepLimit_ > 0 && session_->stepsTaken() >= stepLimit_);
  if (refused) {
    emit runningChanged(false, generation_);  // the page may have assumed it started
    return;
  }
  sinceEmit_.start();
  timer_->start(timerInterval());
  setRunning(true);
}

void BnLabWorker::pause() {
  timer_->stop();
  flush(false);
  setRunning(false);
}

void BnLabWorker::stepOnce() {
  if (running_ || !session_ || session_->failed()) return;
  if (takeStep()) flush(false);
}

void BnLabWorker::setStepsPerSecond(int stepsPerSecond) {
  stepsPerSecond_ = std::max(0, stepsPerSecond);
  if (timer_->isActive()) timer_->setInterval(timerInterval());
}

void BnLabWorker::setStepLimit(qint64 steps) { stepLimit_ = std::max<qint64>(0, steps); }

void BnLabWorker::shutdown() {
  timer_->stop();
  pending_.clear();
  session_.reset();
  running_ = false;
}

void BnLabWorker::tick() {
  if (!session_) {
    pause();
    return;
  }
  if (!takeStep()) return;
  if (stepLimit_ > 0 && session_->stepsTaken() >= stepLimit_) {
    pause();
    return;
  }
  if (sinceEmit_.elapsed() >= kEmitIntervalMs) flush(true);
}

bool BnLabWorker::takeStep() {
  try {
    pending_.push_back(session_->step());
    for (int m = 0; m < kBnLabModelCount; ++m) {
      const auto which = static_cast<BnLabModel>(m);
      if (!session_->modelStopped(which) || stopReported_[static_cast<size_t>(m)]) continue;
      stopReported_[static_cast<size_t>(m)] = true;
      flush(timer_->isActive());  // the steps before it first, so the page shows where it stopped
      emit modelStopped(QString::fromLatin1(bnlab_model_name(which)), QString::fromStdString(session_->modelError(which)),
                        session_->modelStoppedAt(which), generation_);
    }
    return true;
  } catch (const std::exception& e) {
    timer_->stop();
    flush(false);
    const QString model = QString::fromStdString(session_->failedModel());
    const QString text = QString::fromStdString(session_->failed() ? session_->failure() : std::string(e.what()));
    setRunning(false);
    emit failed(model, text, generation_);
    return false;
  }
}

void BnLabWorker::flush(bool running) {
  sinceEmit_.start();
  if (pending_.isEmpty()) return;
  BnLabUpdate update;
  update.steps = std::move(pending_);
  update.running = running;
  pending_ = {};
  emit updated(update, generation_);
}

void BnLabWorker::setRunning(bool running) {
  if (running == running_) return;
  running_ = running;
  emit runningChanged(running, generation_);
}

}  // namespace gui
