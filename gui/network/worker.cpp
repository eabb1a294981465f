#include "gui/network/worker.h"

#include <exception>

#include "engine/error.h"

namespace gui {
namespace {

// How long the lab may take to stop its job and remove its namespaces after SIGTERM when the page
// goes away; it stops its job at once, and every `ip` call it makes has a 10 s timeout.
constexpr int kStopWaitMs = 30000;

QString reportPath(const QTemporaryDir& folder) { return folder.filePath(QStringLiteral("lab.json")); }

}  // namespace

NetworkWorker::NetworkWorker(Runner runner, dpv::course::RealLinkFacts facts, const Generation* generation)
    : runner_(std::move(runner)), facts_(std::move(facts)), generation_(generation) {}

NetworkWorker::~NetworkWorker() { endChild(); }

void NetworkWorker::registerTypes() {
  qRegisterMetaType<NetworkRequest>("gui::NetworkRequest");
  qRegisterMetaType<NetworkResult>("gui::NetworkResult");
}

void NetworkWorker::run(const NetworkRequest& request, quint64 generation) {
  if (!generation_->isCurrent(generation)) return;  // replaced while it waited
  endChild();  // a real run of an older request: its reply would be dropped anyway
  const dpv::course::NetworkRunPlan plan = dpv::course::plan_network_run(request.real, facts_, request.link);
  if (!plan.real) return runSimulated(request, generation, plan.simulated_reason);
  request_ = request;
  requestGeneration_ = generation;
  try {
    startLab(plan.probe_netem);
  } catch (const dpv::Error& e) {
    emit failed(QString::fromStdString(e.full()), generation);
  }
}

void NetworkWorker::runSimulated(const NetworkRequest& request, quint64 generation, const std::string& reason) {
  try {
    dpv::course::NetworkLabPoint point = runner_(request.setup, request.link);
    point.simulated_reason = reason;
    emit finished(std::make_shared<const dpv::course::NetworkLabPoint>(std::move(point)), generation);
  } catch (const dpv::Error& e) {
    emit failed(QString::fromStdString(e.full()), generation);
  } catch (const std::exception& e) {
    emit failed(QString::fromStdString(e.what()), generation);
  }
}

// The report goes to this run's own folder; the command shown (realLabStarted) is the one that runs.
void NetworkWorker::startLab(bool probe) {
  folder_ = std::make_unique<QTemporaryDir>();
  dpv::check(folder_->isValid(), "cannot make a temporary folder for the lab's report: " +
                                     folder_->errorString().toStdString(), dpv::ErrorClass::OSError);
  const std::vector<std::string> args =
      probe ? dpv::course::netem_probe_arguments(request_.setup, request_.preset, request_.link,
                                                 reportPath(*folder_).toStdString())
            : dpv::course::lab_network_arguments(request_.setup, request_.preset, request_.link,
                                                 reportPath(*folder_).toStdString());
  QStringList arguments;
  for (const std::string& a : args) arguments << QString::fromStdString(a);
  probing_ = probe;
  stopping_ = false;
  child_ = std::make_unique<QProcess>();
  child_->setProcessChannelMode(QProcess::MergedChannels);
  connect(child_.get(), &QProcess::finished, this, &NetworkWorker::onLabFinished);
  connect(child_.get(), &QProcess::errorOccurred, this, [this](QProcess::ProcessError error) {
    if (error != QProcess::FailedToStart || !child_) return;
    const QString why = child_->errorString();
    child_.release()->deleteLater();
    emit failed(tr("Could not start %1: %2").arg(QString::fromStdString(facts_.dpv_exe), why), requestGeneration_);
  });
  emit realLabStarted(QString::fromStdString(dpv::course::shell_command(facts_.dpv_exe, args)), probe,
                      requestGeneration_);
  child_->start(QString::fromStdString(facts_.dpv_exe), arguments);
}

void NetworkWorker::onLabFinished(int exitCode, QProcess::ExitStatus status) {
  if (!child_) return;
  const QString output = QString::fromLocal8Bit(child_->readAll());
  child_.release()->deleteLater();  // inside its own signal: not deleted here
  const quint64 generation = requestGeneration_;
  if (stopping_) {
    stopping_ = false;
    emit stopped(generation);
    return;
  }
  if (!generation_->isCurrent(generation)) return;
  if (status != QProcess::NormalExit || exitCode != 0) {
    // The lab's own last lines (its "dpv: error: ..." among them), shown as they are.
    const QStringList lines = output.trimmed().split(QLatin1Char('\n'));
    emit failed(tr("`dpv lab network` %1: %2")
                    .arg(status == QProcess::NormalExit ? tr("exited with status %1").arg(exitCode) : tr("crashed"),
                         lines.mid(qMax(0, lines.size() - 4)).join(QStringLiteral(" | "))),
                generation);
    return;
  }
  try {
    const dpv::course::LabNetworkReport report =
        dpv::course::read_lab_network_report(reportPath(*folder_).toStdString());
    if (!report.simulated) facts_.netem = report.netem;  // the lab's own finding, kept for the next runs
    if (probing_) return afterProbe(report);
    dpv::check(report.points.size() == 1, "the lab's report holds " + std::to_string(report.points.size()) +
                                              " points, not the one the page asked for",
               dpv::ErrorClass::RuntimeError);
    emit finished(std::make_shared<const dpv::course::NetworkLabPoint>(report.points.front()), generation);
  } catch (const dpv::Error& e) {
    emit failed(QString::fromStdString(e.full()), generation);
  }
}

void NetworkWorker::afterProbe(const dpv::course::LabNetworkReport& report) {
  if (report.simulated) {  // the lab could not shape a link after all: its reason, its simulated link
    return runSimulated(request_, requestGeneration_, report.simulated_reason);
  }
  const dpv::course::NetworkRunPlan plan = dpv::course::plan_network_run(true, facts_, request_.link);
  if (!plan.real) return runSimulated(request_, requestGeneration_, plan.simulated_reason);
  startLab(false);
}

void NetworkWorker::stop() {
  if (!child_ || child_->state() == QProcess::NotRunning) return;
  stopping_ = true;
  child_->terminate();  // SIGTERM: the lab stops its job, removes its namespaces, then exits
}

void NetworkWorker::shutdown() { endChild(); }

void NetworkWorker::endChild() {
  if (!child_) return;
  disconnect(child_.get(), nullptr, this, nullptr);
  if (child_->state() != QProcess::NotRunning) {
    child_->terminate();
    if (!child_->waitForFinished(kStopWaitMs)) {
      child_->kill();
      child_->waitForFinished(kStopWaitMs);
    }
  }
  child_.reset();
  stopping_ = false;
}

}  // namespace gui
