#pragma once
// The BatchNorm lab: per-device BatchNorm and SyncBatchNorm under DataParallel, and per-rank
// BatchNorm and SyncBatchNorm under DDP, trained side by side from one seed on the same batches,
// with a single-device reference, and live charts of what each
// device normalises with, the running statistics, loss, accuracy and the distance from the
// reference. Training runs in a BnLabWorker on its own QThread; this page only draws.
#include <QPointer>
#include <QStringList>
#include <array>

#include "gui/common/context.h"
#include "gui/common/page.h"
#include "gui/bnlab/types.h"
#include "gui/bnlab/worker.h"
#include "gui/runtime/generation.h"
#include "gui/runtime/worker_thread.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QFrame;
class QLabel;
class QPushButton;
class QSpinBox;
class QSplitter;
class QTextBrowser;
class QTimer;

namespace gui {

class BnLabCharts;

class BatchNormLabPage : public Page {
  Q_OBJECT
 public:
  explicit BatchNormLabPage(AppContext* context, QWidget* parent = nullptr);
  ~BatchNormLabPage() override;  // stops the worker and waits for its thread

  QList<Shot> screenshots() override;
  bool usesSettingsBar() const override { return false; }  // the lab's controls are its own

  // --- State, for tests and the screenshot shots.
  BnLabCharts* charts() const { return charts_; }
  BnLabConfig config() const;  // what the controls describe
  bool isRunning() const { return running_; }
  bool hasFailed() const { return !failure_.isEmpty(); }
  QString failure() const { return failure_; }
  bool isConfigured() const { return configured_; }
  QString calloutText() const;
  bool calloutVisible() const;
  QString explanationText() const;
  QString statusText() const;
  QString runCaption() const;
  QLabel* statusLabel() const { return statusLabel_; }
  // Sets the controls to `config` and resets the lab. The lab has its own controls and defaults
  // (BnLabConfig{}); the settings bar neither changes them nor is changed.
  void setConfig(const BnLabConfig& config);
  // The devices and batch of a quiz question (AppContext::labSettingsRequested); resets the lab.
  void applyQuestionSettings(int devices, int batchSize);
  void setStepsPerSecond(int stepsPerSecond);  // 0: as fast as the devices go
  void setStepLimit(qint64 steps);
  // The batch control: while the lab trains the next step uses it; before, the lab starts afresh.
  void setBatchSize(int rows);
  void setLearningRate(double lr);  // the learning-rate control, taken like the batch
  void selectLayer(int layerSlot, int channel);
  // Writes every chart as <dir>/bnlab-<chart>.png and/or .csv; returns one message per failure.
  QStringList saveCharts(const QString& dir, bool png, bool csv);

 public slots:
  void start();
  void pause();
  void stepOnce();
  void reset();

 signals:
  // To the worker (queued).
  void configureRequested(const BnLabConfig& config, quint64 generation);
  void startRequested();
  void pauseRequested();
  void stepRequested();
  void stepsPerSecondRequested(int stepsPerSecond);
  void stepLimitRequested(qint64 steps);
  void batchSizeRequested(qint64 rows, quint64 generation);
  void learningRateRequested(double lr, quint64 generation);
  // For tests and shots: the charts now show `steps` steps; the lab became ready; it stopped on an error.
  void stepsShown(qint64 steps);
  void labConfigured();
  void labFailed(const QString& message);
  void runningStateChanged(bool running);

 protected:
  void changeEvent(QEvent* event) override;
  void showEvent(QShowEvent* event) override;

 private:
  QWidget* buildControls();
  QWidget* buildSidePanel();
  QWidget* buildChartToolbar();
  void connectWorker();
  void loadExplanation();
  void shrinkHeadings();
  void showConfig(const BnLabConfig& config);  // the controls, without resetting
  void scheduleReset();
  void onBatchChanged(int rows);  // while training: the next step's batch; before: a fresh lab
  void onLearningRateChanged(double lr);  // the same for the learning rate
  void onConfigured(const BnLabInfo& info);
  void onUpdated(const BnLabUpdate& update, quint64 generation);
  void onRunningChanged(bool running, quint64 generation);
  void onFailed(const QString& model, const QString& message, quint64 generation);
  void onModelStopped(const QString& model, const QString& message, qint64 step, quint64 generation);
  double recentLoss(int model) const;  // mean loss of the last kRecentSteps steps (NaN once stopped)
  void updateCallout();
  void updateButtons();
  void updateStatus();
  void updateSelection();
  void styleCallout();
  void chooseFolderAndSave(bool png, bool csv);
  int deviceCountFromSpec() const;
  QString deviceSpec() const;

  // Worker thread.
  WorkerThread<BnLabWorker> worker_{QStringLiteral("bnlab-worker")};
  Generation generation_;  // of the lab's session: updates of an older one are ignored
  bool running_ = false;
  bool configured_ = false;
  QString failure_;
  QString failureModel_;
  QString probeError_;
  QString probeModel_;
  QString stoppedModel_;  // a model that stopped while the others train on
  QString stoppedError_;
  qint64 stoppedStep_ = 0;
  static constexpr int kRecentSteps = 20;
  std::array<double, kBnLabModelCount> firstLosses_{};
  QList<std::array<double, kBnLabModelCount>> recentLosses_;  // the last kRecentSteps steps' losses
  QStringList deviceLabels_;
  QTimer* resetTimer_ = nullptr;
  qint64 stepLimit_ = 500;

  // The lab's own settings (it does not follow the settings bar).
  QString baseSpec_ = QStringLiteral("cpu:4");
  quint64 seed_ = 0;

  // Controls.
  QPushButton* startButton_ = nullptr;
  QPushButton* pauseButton_ = nullptr;
  QPushButton* stepButton_ = nullptr;
  QPushButton* resetButton_ = nullptr;
  QComboBox* speedBox_ = nullptr;
  QSpinBox* limitSpin_ = nullptr;
  QSpinBox* devicesSpin_ = nullptr;
  QLabel* devicesKind_ = nullptr;
  QSpinBox* batchSpin_ = nullptr;
  QDoubleSpinBox* lrSpin_ = nullptr;
  QDoubleSpinBox* sgdMomentumSpin_ = nullptr;
  QDoubleSpinBox* bnMomentumSpin_ = nullptr;
  QCheckBox* sortedBox_ = nullptr;
  QComboBox* layerBox_ = nullptr;
  QSpinBox* channelSpin_ = nullptr;
  QLabel* statusLabel_ = nullptr;
  QLabel* runCaption_ = nullptr;  // "Data: model … · seed … · batch … · modes · devices"
  QFrame* callout_ = nullptr;
  QLabel* calloutLabel_ = nullptr;
  QTextBrowser* explanation_ = nullptr;
  BnLabCharts* charts_ = nullptr;
  QSplitter* splitter_ = nullptr;
  bool splitterSized_ = false;
};

}  // namespace gui
