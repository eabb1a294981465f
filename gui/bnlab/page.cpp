// The BatchNorm lab page: its settings, the session on the worker thread (configure, start, pause,
// step, reset), what the worker answers, and saving the charts. page_widgets.cpp builds its
// widgets and shows the state in them.
#include "gui/bnlab/page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QLabel>
#include <QSpinBox>
#include <QSplitter>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>

#include "engine/data_parallel.h"
#include "engine/device.h"
#include "engine/error.h"
#include "gui/common/flow_layout.h"
#include "gui/bnlab/callout.h"
#include "gui/common/chart_style.h"
#include "gui/bnlab/charts.h"

namespace gui {

BatchNormLabPage::BatchNormLabPage(AppContext* context, QWidget* parent) : Page(context, parent) {
  BnLabWorker::registerTypes();
  setObjectName(QStringLiteral("bnlab"));

  resetTimer_ = new QTimer(this);
  resetTimer_->setSingleShot(true);
  resetTimer_->setInterval(250);  // one reset after a burst of edits, not one per keystroke
  connect(resetTimer_, &QTimer::timeout, this, &BatchNormLabPage::reset);

  charts_ = new BnLabCharts(this);
  auto* chartColumn = new QWidget(this);
  auto* chartLayout = new QVBoxLayout(chartColumn);
  chartLayout->setContentsMargins(0, 0, 0, 0);
  chartLayout->addWidget(buildChartToolbar());
  chartLayout->addWidget(charts_, 1);

  splitter_ = new QSplitter(Qt::Horizontal, this);
  auto* splitter = splitter_;
  splitter->addWidget(chartColumn);
  splitter->addWidget(buildSidePanel());
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 1);
  splitter->setChildrenCollapsible(false);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(8, 8, 8, 8);
  layout->addWidget(buildControls());
  layout->addWidget(splitter, 1);

  loadExplanation();
  styleCallout();

  connectWorker();
  worker_.start();
  if (context) connect(context, &AppContext::labSettingsRequested, this, &BatchNormLabPage::applyQuestionSettings);

  // The lab has its own controls and defaults that train (4 devices, batch 32: chunks of 8); the
  // settings bar's (a batch of 10 on 4 devices leaves one device a single sample) do not apply here.
  showConfig(BnLabConfig{});
  emit stepsPerSecondRequested(speedBox_->currentData().toInt());  // the default speed buildControls chose
  emit stepLimitRequested(stepLimit_);
  reset();
}

BatchNormLabPage::~BatchNormLabPage() {
  // Stop training and free the devices on the worker's own thread (it finishes the step under
  // way first), then end the thread and delete the worker, which no thread runs any more.
  resetTimer_->stop();
  worker_.stop(&BnLabWorker::shutdown);
}

void BatchNormLabPage::connectWorker() {
  BnLabWorker* worker = worker_.worker();
  connect(this, &BatchNormLabPage::configureRequested, worker, &BnLabWorker::configure);
  connect(this, &BatchNormLabPage::startRequested, worker, &BnLabWorker::start);
  connect(this, &BatchNormLabPage::pauseRequested, worker, &BnLabWorker::pause);
  connect(this, &BatchNormLabPage::stepRequested, worker, &BnLabWorker::stepOnce);
  connect(this, &BatchNormLabPage::stepsPerSecondRequested, worker, &BnLabWorker::setStepsPerSecond);
  connect(this, &BatchNormLabPage::stepLimitRequested, worker, &BnLabWorker::setStepLimit);
  connect(this, &BatchNormLabPage::batchSizeRequested, worker, &BnLabWorker::setBatchSize);
  connect(this, &BatchNormLabPage::learningRateRequested, worker, &BnLabWorker::setLearningRate);
  connect(worker, &BnLabWorker::configured, this, &BatchNormLabPage::onConfigured);
  connect(worker, &BnLabWorker::updated, this, &BatchNormLabPage::onUpdated);
  connect(worker, &BnLabWorker::runningChanged, this, &BatchNormLabPage::onRunningChanged);
  connect(worker, &BnLabWorker::failed, this, &BatchNormLabPage::onFailed);
  connect(worker, &BnLabWorker::modelStopped, this, &BatchNormLabPage::onModelStopped);
}

void BatchNormLabPage::showConfig(const BnLabConfig& c) {
  const QSignalBlocker b1(devicesSpin_), b2(batchSpin_), b3(lrSpin_), b4(sgdMomentumSpin_), b5(bnMomentumSpin_),
      b6(sortedBox_);
  baseSpec_ = QString::fromStdString(c.devices);
  try {
    const dpv::DeviceSpec spec = dpv::parse_device_spec(c.devices);
    devicesSpin_->setValue(spec.count);
    // Only CPU sets and virtual devices on one GPU have a count this page can change.
    devicesSpin_->setEnabled(spec.kind == dpv::DeviceKind::Cpu || spec.is_virtual);
    devicesKind_->setText(spec.kind == dpv::DeviceKind::Cpu ? tr("simulated on CPU") : tr("CUDA (%1)").arg(baseSpec_));
  } catch (const dpv::Error&) {
    devicesKind_->setText(tr("spec \"%1\"").arg(baseSpec_));  // the worker reports the error in the callout
  }
  batchSpin_->setValue(static_cast<int>(c.batchSize));
  lrSpin_->setValue(c.learningRate);
  sgdMomentumSpin_->setValue(c.sgdMomentum);
  bnMomentumSpin_->setValue(c.bnMomentum);
  sortedBox_->setChecked(c.classSorted);
  seed_ = c.seed;
}

QString BatchNormLabPage::deviceSpec() const {
  try {
    const dpv::DeviceSpec spec = dpv::parse_device_spec(baseSpec_.toStdString());
    const int k = devicesSpin_->value();
    if (spec.kind == dpv::DeviceKind::Cpu) return QStringLiteral("cpu:%1").arg(k);
    if (spec.is_virtual && !spec.gpus.empty()) return QStringLiteral("cuda:%1x%2").arg(spec.gpus.front()).arg(k);
  } catch (const dpv::Error&) {
  }
  return baseSpec_;
}

int BatchNormLabPage::deviceCountFromSpec() const {
  if (!deviceLabels_.isEmpty()) return static_cast<int>(deviceLabels_.size());
  return devicesSpin_->value();
}

BnLabConfig BatchNormLabPage::config() const {
  BnLabConfig c;
  c.devices = deviceSpec().toStdString();
  c.batchSize = batchSpin_->value();
  c.learningRate = lrSpin_->value();
  c.sgdMomentum = sgdMomentumSpin_->value();
  c.bnMomentum = bnMomentumSpin_->value();
  c.classSorted = sortedBox_->isChecked();
  c.seed = seed_;
  return c;
}

void BatchNormLabPage::setConfig(const BnLabConfig& c) {
  showConfig(c);
  reset();
}

void BatchNormLabPage::applyQuestionSettings(int devices, int batchSize) {
  {
    const QSignalBlocker block(devicesSpin_);
    if (devicesSpin_->isEnabled()) devicesSpin_->setValue(devices);  // a fixed GPU list keeps its count
  }
  BnLabConfig c = config();
  c.batchSize = batchSize;
  setConfig(c);
}

void BatchNormLabPage::setStepsPerSecond(int stepsPerSecond) {
  for (int i = 0; i < speedBox_->count(); ++i)
    if (speedBox_->itemData(i).toInt() == stepsPerSecond) {
      speedBox_->setCurrentIndex(i);  // emits the request
      return;
    }
  emit stepsPerSecondRequested(stepsPerSecond);
}

void BatchNormLabPage::setStepLimit(qint64 steps) {
  stepLimit_ = std::clamp<qint64>(steps, 1, limitSpin_->maximum());
  {
    const QSignalBlocker block(limitSpin_);
    limitSpin_->setValue(static_cast<int>(stepLimit_));
  }
  emit stepLimitRequested(stepLimit_);
  updateButtons();
}

void BatchNormLabPage::selectLayer(int layerSlot, int channel) {
  layerBox_->setCurrentIndex(layerSlot);
  channelSpin_->setValue(channel);
  updateSelection();
}

void BatchNormLabPage::updateSelection() {
  const int channels = layerBox_->currentData().toInt();
  {
    const QSignalBlocker block(channelSpin_);
    channelSpin_->setRange(0, std::max(0, channels - 1));
  }
  charts_->setSelection(std::max(0, layerBox_->currentIndex()), channelSpin_->value(), layerBox_->currentText());
}

void BatchNormLabPage::scheduleReset() { resetTimer_->start(); }

void BatchNormLabPage::setBatchSize(int rows) { batchSpin_->setValue(rows); }

void BatchNormLabPage::setLearningRate(double lr) { lrSpin_->setValue(lr); }

void BatchNormLabPage::onBatchChanged(int rows) {
  // Before the first step, or with a reset pending, a new lab takes the batch anyway.
  if (!configured_ || hasFailed() || charts_->stepCount() == 0 || resetTimer_->isActive()) return scheduleReset();
  emit batchSizeRequested(rows, generation_.current());
  updateStatus();
}

void BatchNormLabPage::onLearningRateChanged(double lr) {
  if (!configured_ || hasFailed() || charts_->stepCount() == 0 || resetTimer_->isActive()) return scheduleReset();
  emit learningRateRequested(lr, generation_.current());
  updateStatus();
}

void BatchNormLabPage::reset() {
  resetTimer_->stop();
  const quint64 generation = generation_.next();  // anything still queued from the old session is ignored from here on
  running_ = false;
  configured_ = false;
  failure_.clear();
  failureModel_.clear();
  probeError_.clear();
  probeModel_.clear();
  stoppedModel_.clear();
  stoppedError_.clear();
  stoppedStep_ = 0;
  firstLosses_ = {};
  recentLosses_.clear();
  deviceLabels_.clear();
  charts_->clear(devicesSpin_->value(), dpv::chunk_sizes(batchSpin_->value(), devicesSpin_->value()));
  emit configureRequested(config(), generation);
  updateCallout();
  updateButtons();
  updateStatus();
}

void BatchNormLabPage::start() {
  if (!configured_ || hasFailed() || running_) return;
  if (charts_->stepCount() >= stepLimit_) return;
  running_ = true;  // optimistic; the worker confirms with runningChanged
  emit startRequested();
  updateButtons();
}

void BatchNormLabPage::pause() { emit pauseRequested(); }

void BatchNormLabPage::stepOnce() {
  if (!configured_ || hasFailed() || running_) return;
  emit stepRequested();
}

void BatchNormLabPage::onConfigured(const BnLabInfo& info) {
  if (!generation_.isCurrent(info.generation)) return;
  configured_ = true;
  deviceLabels_ = info.deviceLabels;
  probeError_ = info.probeError;
  probeModel_ = info.probeModel;
  charts_->clear(deviceCountFromSpec(), dpv::chunk_sizes(batchSpin_->value(), deviceCountFromSpec()));
  updateCallout();
  updateButtons();
  updateStatus();
  emit labConfigured();
}

void BatchNormLabPage::onUpdated(const BnLabUpdate& update, quint64 generation) {
  if (!generation_.isCurrent(generation)) return;
  charts_->appendSteps(update.steps);
  for (const BnLabStep& step : update.steps) {
    std::array<double, kBnLabModelCount> losses{};
    for (int m = 0; m < kBnLabModelCount; ++m) losses[static_cast<size_t>(m)] = step.models[static_cast<size_t>(m)].loss;
    if (step.step == 1) firstLosses_ = losses;
    recentLosses_.append(losses);
    if (recentLosses_.size() > kRecentSteps) recentLosses_.removeFirst();
  }
  const bool resultDue = !update.steps.isEmpty() && update.steps.back().step >= kBnLabResultSteps;
  if (resultDue) updateCallout();
  updateButtons();
  updateStatus();
  emit stepsShown(charts_->stepCount());
}

void BatchNormLabPage::onRunningChanged(bool running, quint64 generation) {
  if (!generation_.isCurrent(generation)) return;
  running_ = running;
  updateButtons();
  updateStatus();
  emit runningStateChanged(running);
}

void BatchNormLabPage::onFailed(const QString& model, const QString& message, quint64 generation) {
  if (!generation_.isCurrent(generation)) return;
  running_ = false;
  failure_ = message;
  failureModel_ = model;
  if (model == QLatin1String("setup")) configured_ = false;
  updateCallout();
  updateButtons();
  updateStatus();
  showStatus(tr("BatchNorm lab stopped: %1").arg(message));
  emit labFailed(message);
}

void BatchNormLabPage::onModelStopped(const QString& model, const QString& message, qint64 step, quint64 generation) {
  if (!generation_.isCurrent(generation) || !stoppedModel_.isEmpty()) return;  // the first one is told
  stoppedModel_ = model;
  stoppedError_ = message;
  stoppedStep_ = step;
  updateCallout();
  showStatus(tr("BatchNorm lab: the %1 model stopped; the others train on").arg(model));
}

QStringList BatchNormLabPage::saveCharts(const QString& dir, bool png, bool csv) {
  QStringList problems;
  if (!QDir().mkpath(dir)) return {tr("cannot create the folder %1").arg(dir)};
  for (int c = 0; c < BnLabCharts::kChartCount; ++c) {
    const auto chart = static_cast<BnLabCharts::Chart>(c);
    const QString stem = QDir(dir).filePath(QStringLiteral("bnlab-") + BnLabCharts::chartId(chart));
    if (png)
      if (QString e = charts_->savePng(chart, stem + QStringLiteral(".png")); !e.isEmpty()) problems << e;
    if (csv)
      if (QString e = charts_->saveCsv(chart, stem + QStringLiteral(".csv")); !e.isEmpty()) problems << e;
  }
  return problems;
}

void BatchNormLabPage::chooseFolderAndSave(bool png, bool csv) {
  const QString dir = QFileDialog::getExistingDirectory(this, png ? tr("Save the charts as PNG into")
                                                                  : tr("Save the chart data as CSV into"));
  if (dir.isEmpty()) return;
  const QStringList problems = saveCharts(dir, png, csv);
  const QString message = problems.isEmpty()
                              ? tr("Saved %1 charts (%2) in %3").arg(BnLabCharts::kChartCount).arg(png ? "PNG" : "CSV").arg(dir)
                              : tr("Saving failed: %1").arg(problems.join(QStringLiteral("; ")));
  statusLabel_->setText(message);
  showStatus(message);
}

}  // namespace gui
