#pragma once
// Trains the BatchNorm lab's models (course/bnlab_session.h) on its own QThread. The GUI thread talks to it only
// through queued signals and slots carrying plain values (gui/bnlab/types.h); it sends the steps it
// has taken at most every kEmitIntervalMs, so the window redraws a few times a second however
// fast training runs.
#include <QElapsedTimer>
#include <QObject>
#include <QStringList>
#include <QVector>
#include <memory>

#include "gui/bnlab/types.h"

class QTimer;

namespace dpv::course {
class BnLabSession;
}  // namespace dpv::course

namespace gui {

// What the GUI learns when a (re)configured session is ready.
struct BnLabInfo {
  quint64 generation = 0;
  QStringList deviceLabels;  // of the DataParallel models' devices
  // The engine's error for the first batch, found on throwaway copies of the models before any
  // training (a one-sample chunk, say); empty when the settings train fine.
  QString probeModel;
  QString probeError;
};

}  // namespace gui

Q_DECLARE_METATYPE(gui::BnLabInfo)

namespace gui {

class BnLabWorker : public QObject {
  Q_OBJECT
 public:
  static constexpr int kEmitIntervalMs = 50;
  explicit BnLabWorker(QObject* parent = nullptr);
  ~BnLabWorker() override;
  // Registers the value types for queued connections (call once before connecting).
  static void registerTypes();

 public slots:
  // Drops the current session and builds a fresh one (the lab's reset). Every later signal carries
  // `generation`, so the GUI can ignore updates still queued from an older session.
  void configure(const BnLabConfig& config, quint64 generation);
  void start();
  void pause();
  void stepOnce();
  void setStepsPerSecond(int stepsPerSecond);  // 0: as fast as the devices go
  void setStepLimit(qint64 steps);             // pause once this many steps are taken (0: no limit)
  // The next step's global batch, without a restart (BnLabSession::setBatchSize).
  void setBatchSize(qint64 rows, quint64 generation);
  // The next step's learning rate, without a restart (BnLabSession::setLearningRate).
  void setLearningRate(double lr, quint64 generation);
  // Stops training and frees the session (its device threads) on this thread; the owner calls it
  // (blocking) before quitting the thread.
  void shutdown();

 signals:
  void configured(const BnLabInfo& info);
  void updated(const BnLabUpdate& update, quint64 generation);
  void runningChanged(bool running, quint64 generation);
  // An engine error: which model, and the engine's own text ("ValueError: ...").
  void failed(const QString& model, const QString& message, quint64 generation);
  // One model stopped at an engine error at `step` while the others train on (sent once per model).
  void modelStopped(const QString& model, const QString& message, qint64 step, quint64 generation);

 private:
  void tick();
  bool takeStep();  // one step into pending_; false (after reporting) on an error
  void flush(bool running);
  void setRunning(bool running);
  int timerInterval() const;

  std::unique_ptr<dpv::course::BnLabSession> session_;
  QTimer* timer_;
  QElapsedTimer sinceEmit_;
  QVector<BnLabStep> pending_;
  std::array<bool, kBnLabModelCount> stopReported_{};  // modelStopped sent for this session
  quint64 generation_ = 0;
  int stepsPerSecond_ = 0;
  qint64 stepLimit_ = 0;
  bool running_ = false;
};

}  // namespace gui
