// The Timeline page's "Run as W processes": the settings bar's model, batch and devices trained by
// world real processes (`dpv launch ... -- train --ddp`, gui/runtime/process_run.h), whose merged trace
// then opens here with one group of lanes per rank. Rank 0's progress line shows while it runs;
// Cancel stops every worker; an error is shown in the launcher's words and the page stays usable.
#include <QDir>
#include <QFileInfo>
#include <QLabel>
#include <QTabWidget>
#include <QPushButton>
#include <QStyle>

#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/input_file.h"
#include "engine/io/trace_merge.h"
#include "gui/common/context.h"
#include "gui/runtime/run_spec_from_settings.h"
#include "gui/timeline/fault_lab.h"
#include "gui/timeline/page.h"

namespace gui {

namespace {

// The status line is a yellow notice while running and a red banner for an error.
void setLabelKind(QLabel* label, const char* objectName) {
  if (label->objectName() == QLatin1String(objectName)) return;
  label->setObjectName(QLatin1String(objectName));
  label->style()->unpolish(label);
  label->style()->polish(label);
}

}  // namespace

ProcessRunRequest TimelinePage::processRequest() const {
  // The launched ranks run DDP whatever the Iteration page's mode, with dpv train's own buckets, so
  // the run is described without that mode (which would also read the preset for teaching buckets).
  AppSettings s = context()->settings();
  s.strategy = dpv::StrategyKind::DataParallel;
  ProcessRunRequest r;
  r.run = runSpecFromSettings(s);
  r.run.strategy = dpv::StrategyKind::DistributedDataParallel;
  r.steps = kProcessSteps;
  return r;
}

bool TimelinePage::processesRunning() const { return processRun_->running(); }

QString TimelinePage::processStatus() const { return processStatus_->isHidden() ? QString() : processStatus_->text(); }

bool TimelinePage::processButtonEnabled() const { return processButton_->isEnabled(); }

void TimelinePage::updateProcessButton() {
  QString why;
  const int w = ProcessRun::processCount(context()->settings().devices, &why);
  processButton_->setText(w > 0 ? tr("Run as %1 processes").arg(w) : tr("Run as processes"));
  processButton_->setEnabled(w > 0 && !processRun_->running());
  processButton_->setToolTip(
      w > 0 ? tr("Trains the current model and batch for %1 iterations as %2 real processes (dpv launch, DistributedDataParallel "
                 "over %3), then shows their merged trace: one group of lanes per rank")
                  .arg(kProcessSteps).arg(w)
                  .arg(context()->settings().devices.startsWith(QLatin1String("cuda")) ? tr("NCCL") : tr("Gloo on 127.0.0.1"))
            : why);
}

void TimelinePage::runAsProcesses(const ProcessRunRequest& request) {
  if (processRun_->running()) return;
  setLabelKind(processStatus_, "notice");
  processStatus_->setText(tr("Starting %1 processes with dpv launch …").arg(std::max(1, ProcessRun::processCount(QString::fromStdString(request.run.devices), nullptr))));
  processStatus_->setVisible(true);
  processButton_->setEnabled(false);
  cancelButton_->setVisible(true);
  cancelButton_->setEnabled(true);
  // start() reports a failure to start through finished(), like any other end.
  processRun_->start(request);
}

void TimelinePage::cancelProcesses() {
  if (!processRun_->running()) return;
  cancelButton_->setEnabled(false);
  faultLab_->continueStoppedRank();  // a stopped rank would only end by the launcher's SIGKILL, seconds later
  processStatus_->setText(tr("Stopping every worker …"));
  processRun_->cancel();
}

void TimelinePage::onProcessRunFinished(const ProcessRunResult& result) {
  cancelButton_->setVisible(false);
  updateProcessButton();
  if (result.ok) {
    // The merged trace loads off the GUI thread like any other; processRunFinished() follows it.
    if (openTrace(result.tracePath, result.commandLine)) {
      processTracePending_ = true;
      processStatus_->setToolTip(result.commandLine);
      processStatus_->setText(tr("The ranks finished; reading their merged trace …"));
      return;
    }
    return showProcessFailure(tr("The processes finished but their trace cannot be shown: another trace is still loading"), false,
                              result.commandLine);
  }
  showProcessFailure(result.error, result.cancelled, result.commandLine);
  if (!result.cancelled) openRankTracesOfFailedRun(result.commandLine);
}

void TimelinePage::openRankTracesOfFailedRun(const QString& commandLine) {
  const QStringList traces = processRun_->rankTracesWritten();
  if (traces.isEmpty()) {
    // A rank writes its trace when its training ends: one that was stopped wrote none.
    processStatus_->setText(processStatus_->text() +
                            tr("<br>No rank wrote its trace (each writes it when its training ends), so the chart shows what it showed before."));
    return;
  }
  try {
    std::vector<std::string> texts, names;
    for (const QString& path : traces) {
      texts.push_back(dpv::read_file(path.toStdString(), dpv::kTraceInput));
      names.push_back(QFileInfo(path).fileName().toStdString());
    }
    const QString merged = QDir(processRun_->workFolder()).filePath(QStringLiteral("written-before-the-failure.json"));
    dpv::write_file_atomic(merged.toStdString(), dpv::merge_chrome_traces(texts, names));
    processStatus_->setText(processStatus_->text() + tr("<br>Showing the traces of the %n rank(s) that wrote one before the end.", nullptr,
                                                        static_cast<int>(traces.size())));
    openTrace(merged, commandLine);
  } catch (const dpv::Error& e) {
    processStatus_->setText(processStatus_->text() + tr("<br>The ranks' traces cannot be shown: %1").arg(QString::fromStdString(e.what()).toHtmlEscaped()));
  }
}

void TimelinePage::showFaultLab() { sideTabs_->setCurrentWidget(faultLab_); }

void TimelinePage::onProcessTraceLoaded(TraceLoadEnd end, const QString& error) {
  if (!processTracePending_) return;  // a file the learner opened
  processTracePending_ = false;
  if (end == TraceLoadEnd::Shown) {
    processStatus_->setVisible(false);
    emit processRunFinished(true);
    return;
  }
  showProcessFailure(end == TraceLoadEnd::Cancelled ? tr("Loading the ranks' merged trace was cancelled.")
                                                    : tr("The processes finished but their trace cannot be shown: %1").arg(error),
                     end == TraceLoadEnd::Cancelled, processStatus_->toolTip());
}

void TimelinePage::showProcessFailure(const QString& error, bool cancelled, const QString& commandLine) {
  setLabelKind(processStatus_, cancelled ? "notice" : "errorBanner");
  processStatus_->setText(cancelled ? error.toHtmlEscaped() : tr("<b>The run as processes failed:</b> %1").arg(error.toHtmlEscaped()));
  processStatus_->setToolTip(commandLine);
  processStatus_->setVisible(true);
  emit processRunFinished(false);
}

}  // namespace gui
