#pragma once
// The engine side of the app: lives on a QThread (see EngineController) and owns every engine
// object (devices, trainer, the iteration in progress). It answers queued requests and replies
// with value snapshots (IterationInfo, dpv::StageEvent), so the GUI thread only draws.
#include <QObject>
#include <atomic>
#include <memory>

#include "gui/runtime/engine_types.h"
#include "gui/runtime/settings.h"
#include "gui/runtime/generation.h"

namespace dpv {
class DeviceSet;
class Strategy;
class StrategyIteration;
struct Dataset;
}  // namespace dpv

namespace gui {

// The host batch the Iteration page trains `preset` on: the data the code panel's program builds
// (course/sample_program.h program_data: torch.randn inputs, torch.randint labels; for SimpleModel
// the seed program's own), one fixed batch for every iteration of a run. Throws dpv::Error when the
// model cannot take a batch.
dpv::Dataset makeBatchFor(const QString& preset, int64_t rows, uint64_t seed);

class EngineWorker : public QObject {
  Q_OBJECT
 public:
  // `generation` is the controller's: requests from older generations are skipped.
  EngineWorker(const Generation* generation, const std::atomic<bool>* stopping);
  ~EngineWorker() override;

 public slots:
  // New settings: drops the trainer and the iteration; they are rebuilt on the next request.
  void configure(const AppSettings& settings, quint64 generation);
  // Makes sure an iteration exists (building devices, model and trainer if needed) and announces it.
  void prepare(quint64 generation);
  // Runs the next stage of the current iteration; starts the next iteration after the last stage.
  void runStage(quint64 generation);
  // Runs the rest of the current iteration (or a whole new one) stage by stage.
  void runIteration(quint64 generation);
  // The source document's sample program: SimpleModel, batch 32, lr 0.01, one step on `settings.devices`.
  void runSample(const AppSettings& settings, quint64 requestId);

 signals:
  void iterationStarted(const IterationInfo& info);
  void stageFinished(quint64 generation, const dpv::StageEvent& event);
  void failed(quint64 generation, const gui::EngineFailure& failure);
  void sampleFinished(quint64 requestId, const QString& text, bool ok);
  // Sent once at the end of every request (also skipped ones), so the controller can count them.
  void requestDone(quint64 generation);

 private:
  bool stale(quint64 generation) const;
  void ensureIteration(quint64 generation);  // throws dpv::Error
  void stepOnce(quint64 generation);         // throws dpv::Error
  void reportFailure(quint64 generation, std::exception_ptr error);
  // The strategy the settings ask for (DataParallel's Trainer or a DdpTrainer), made when missing.
  dpv::Strategy& ensureStrategy();  // throws dpv::Error
  IterationInfo describeIteration(quint64 generation, const dpv::Strategy& strategy) const;
  bool iterationRunning() const;

  const Generation* latest_;
  const std::atomic<bool>* stopping_;
  AppSettings settings_;
  quint64 generation_ = 0;
  QString deviceSpecInUse_;
  std::shared_ptr<dpv::DeviceSet> devices_;
  // DataParallel's Trainer, or (AppSettings::ddp) a DdpTrainer on the same model and global batch.
  std::unique_ptr<dpv::Strategy> strategy_;
  // The iteration in progress, of whichever strategy: one path steps both.
  std::unique_ptr<dpv::StrategyIteration> iteration_;
  std::unique_ptr<dpv::Dataset> batch_;  // the batch the iteration uses (kept alive with it)
  int iterationNumber_ = 0;
  bool inStage_ = false;  // a stage of the program is running (errors are the program's)
};

}  // namespace gui
