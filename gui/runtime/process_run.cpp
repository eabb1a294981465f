#include "gui/runtime/process_run.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QTimer>
#include <map>

#include "engine/device.h"
#include "engine/error.h"
#include "gui/runtime/run_spec_from_settings.h"

namespace gui {

namespace {

// The launcher gives workers 5 s to exit after SIGTERM before it kills them; it gets a little more.
constexpr int kKillAfterMs = 8000;


// A command line as a learner would type it (arguments with spaces quoted).
QString shellLine(const QString& program, const QStringList& args) {
  QStringList words{QFileInfo(program).fileName()};
  for (const QString& a : args) words << (a.contains(QLatin1Char(' ')) ? QStringLiteral("'%1'").arg(a) : a);
  return words.join(QLatin1Char(' '));
}

}  // namespace

ProcessRun::ProcessRun(QObject* parent)
    : QObject(parent), wallTimer_(new QTimer(this)), killTimer_(new QTimer(this)), eventsTimer_(new QTimer(this)) {
  // The launcher appends an event when a rank starts or exits: a tenth of a second is soon enough
  // to show it, and the fault lab's signal follows rank 0's progress lines, not this poll.
  eventsTimer_->setInterval(100);
  connect(eventsTimer_, &QTimer::timeout, this, &ProcessRun::readEvents);
  wallTimer_->setSingleShot(true);
  killTimer_->setSingleShot(true);
  connect(wallTimer_, &QTimer::timeout, this, [this] {
    stop(tr("the job ran longer than its limit of %1 s and was stopped").arg(wallTimer_->interval() / 1000));
  });
  connect(killTimer_, &QTimer::timeout, this, [this] {
    if (process_) process_->kill();  // the launcher did not exit after SIGTERM
  });
}

ProcessRun::~ProcessRun() {
  if (!process_) return;
  disconnect(process_, nullptr, this, nullptr);  // nobody is left to tell
  process_->terminate();
  if (!process_->waitForFinished(kKillAfterMs)) {
    process_->kill();
    process_->waitForFinished(2000);
  }
}

QString ProcessRun::findDpv(QStringList* searched) {
  const QDir app(QCoreApplication::applicationDirPath());
  // Installed: bin/dpviz beside bin/dpv. Build tree: gui/dpviz and cli/dpv; the GUI tests run from tests/gui/.
  const QStringList candidates = {app.filePath(QStringLiteral("dpv")), app.filePath(QStringLiteral("../cli/dpv")),
                                  app.filePath(QStringLiteral("../../cli/dpv"))};
  if (searched) searched->clear();
  for (const QString& c : candidates) {
    const QString path = QDir::cleanPath(c);
    if (searched) searched->append(path);
    const QFileInfo info(path);
    if (info.isFile() && info.isExecutable()) return path;
  }
  return QString();
}

int ProcessRun::processCount(const QString& devices, QString* error) {
  try {
    const dpv::DeviceSpec spec = dpv::parse_device_spec(devices.toStdString());
    if (spec.kind == dpv::DeviceKind::Cuda && spec.is_virtual) {
      if (error) {
        *error = tr("%1 shares GPUs between devices; as processes each rank needs a GPU of its own (NCCL): "
                    "choose cuda:0,1,... or cpu:W").arg(devices);
      }
      return 0;
    }
    return spec.count;
  } catch (const dpv::Error& e) {
    if (error) *error = QString::fromStdString(e.what());
    return 0;
  }
}

dpv::RunSpec ProcessRunRequest::defaultRun() { return runSpecFromSettings(AppSettings{}); }

// Where the launcher writes the job's error (--error-file): beside the trace, in the run's folder.
QString ProcessRun::errorFileBeside(const QString& tracePath) {
  return QFileInfo(tracePath).dir().filePath(QStringLiteral("error.json"));
}

QString ProcessRun::eventsFileBeside(const QString& tracePath) {
  return QFileInfo(tracePath).dir().filePath(QStringLiteral("events.jsonl"));
}

QString ProcessRun::checkpointsBeside(const QString& tracePath) {
  return QFileInfo(tracePath).dir().filePath(QStringLiteral("checkpoints"));
}

QStringList ProcessRun::rankTracesWritten() const {
  if (tracePath_.isEmpty()) return {};
  const QFileInfo trace(tracePath_);
  // "trace.json" -> "trace.rank<r>.json", as dpv train names them.
  const QString prefix = trace.completeBaseName() + QStringLiteral(".rank");
  std::map<int, QString> byRank;
  for (const QFileInfo& f : trace.dir().entryInfoList({prefix + QStringLiteral("*.json")}, QDir::Files)) {
    bool number = false;
    const int rank = f.completeBaseName().mid(prefix.size()).toInt(&number);
    if (number && rank >= 0) byRank[rank] = f.filePath();
  }
  QStringList found;
  for (const auto& [rank, path] : byRank) found << path;
  return found;
}

QStringList ProcessRun::arguments(const ProcessRunRequest& r, const QString& tracePath) {
  const dpv::RunSpec& run = r.run;
  const QString devices = QString::fromStdString(run.devices);
  QString ignored;
  const int w = processCount(devices, &ignored);
  const bool gpus = devices.startsWith(QLatin1String("cuda"));
  // Port 0: the launcher picks a free port for rank 0's store, so two runs never collide.
  QStringList args{QStringLiteral("launch"), QStringLiteral("--nproc-per-node"), QString::number(w),
                   QStringLiteral("--master-addr"), QStringLiteral("127.0.0.1"), QStringLiteral("--master-port"),
                   QStringLiteral("0"), QStringLiteral("--backend"), gpus ? QStringLiteral("nccl") : QStringLiteral("gloo"),
                   QStringLiteral("--timeout"), QString::number(r.timeoutS), QStringLiteral("--error-file"),
                   errorFileBeside(tracePath)};
  if (r.events) args << QStringLiteral("--events-file") << eventsFileBeside(tracePath);
  if (r.maxRestarts > 0) args << QStringLiteral("--max-restarts") << QString::number(r.maxRestarts);
  args << QStringList{QStringLiteral("--"), QStringLiteral("train"), QStringLiteral("--ddp"), QStringLiteral("--devices"),
                   gpus ? QStringLiteral("cuda") : QStringLiteral("cpu:%1").arg(w), QStringLiteral("--preset"),
                   QString::fromStdString(run.preset), QStringLiteral("--batch"), QString::number(run.batch),
                   QStringLiteral("--lr"), QString::number(run.optimizer.lr, 'g', 17), QStringLiteral("--seed"),
                   QString::number(static_cast<quint64>(run.seed)), QStringLiteral("--steps"), QString::number(r.steps),
                   QStringLiteral("--trace"), tracePath, QStringLiteral("--trace-steps"), QString::number(r.traceSteps > 0 ? std::min(r.traceSteps, r.steps) : r.steps)};
  if (run.sync_bn) args << QStringLiteral("--sync-bn");
  // A restarted attempt resumes from the newest checkpoint; one after every step loses none.
  if (r.maxRestarts > 0)
    args << QStringLiteral("--checkpoint") << checkpointsBeside(tracePath) << QStringLiteral("--checkpoint-every") << QStringLiteral("1");
  args << r.extraTrainArguments;
  return args;
}

bool ProcessRun::start(const ProcessRunRequest& request) {
  if (process_) return false;
  ProcessRunResult failure;
  QStringList searched;
  const QString dpv = request.dpvPath.isEmpty() ? findDpv(&searched) : request.dpvPath;
  if (dpv.isEmpty()) {
    failure.error = tr("The dpv program was not found beside the app (looked for %1). Build or install dpv with dpviz.")
                        .arg(searched.join(QStringLiteral(", ")));
    finish(failure);
    return false;
  }
  if (!QFileInfo(dpv).isExecutable()) {
    failure.error = tr("%1 is not a program that can be run: point the app at the dpv binary.").arg(dpv);
    finish(failure);
    return false;
  }
  QString devicesError;
  if (processCount(QString::fromStdString(request.run.devices), &devicesError) <= 0) {
    failure.error = devicesError;
    finish(failure);
    return false;
  }
  dir_ = std::make_unique<QTemporaryDir>(QDir::temp().filePath(QStringLiteral("dpviz-processes-XXXXXX")));
  if (!dir_->isValid()) {
    failure.error = tr("Cannot create a temporary folder for the ranks' traces: %1").arg(dir_->errorString());
    dir_.reset();
    finish(failure);
    return false;
  }
  tracePath_ = dir_->filePath(QStringLiteral("trace.json"));
  const QStringList args = arguments(request, tracePath_);
  commandLine_ = shellLine(dpv, args);
  stdoutPartial_.clear();
  stderrText_.clear();
  lastProgress_.clear();
  stopReason_.clear();
  cancelled_ = false;
  eventsReader_ = dpv::course::LaunchEventsReader();

  process_ = new QProcess(this);
  process_->setWorkingDirectory(dir_->path());
  connect(process_, &QProcess::readyReadStandardOutput, this, &ProcessRun::readStdout);
  connect(process_, &QProcess::readyReadStandardError, this, &ProcessRun::readStderr);
  connect(process_, &QProcess::finished, this,
          [this](int code, QProcess::ExitStatus status) { onFinished(code, status == QProcess::CrashExit); });
  connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart) onStartError();
  });
  wallTimer_->start(static_cast<int>(request.wallLimitS * 1000));
  if (request.events) eventsTimer_->start();
  process_->start(dpv, args);
  return true;
}

QString ProcessRun::workFolder() const { return dir_ ? dir_->path() : QString(); }

void ProcessRun::cancel() {
  if (!process_) return;
  cancelled_ = true;
  stop(QString());
}

void ProcessRun::stop(const QString& reason) {
  if (!process_) return;
  if (stopReason_.isEmpty()) stopReason_ = reason;
  wallTimer_->stop();
  process_->terminate();  // SIGTERM: the launcher forwards it to every worker and waits for them
  if (!killTimer_->isActive()) killTimer_->start(kKillAfterMs);
}

void ProcessRun::readStdout() {
  if (!process_) return;
  stdoutPartial_ += process_->readAllStandardOutput();
  // Only rank 0 prints (its header, then "step i/n  loss ..."); show the newest whole line.
  qsizetype nl;
  while ((nl = stdoutPartial_.indexOf('\n')) >= 0) {
    const QString line = QString::fromUtf8(stdoutPartial_.left(nl)).trimmed();
    stdoutPartial_.remove(0, nl + 1);
    if (line.isEmpty() || line.startsWith(QLatin1String("trace:"))) continue;
    lastProgress_ = line;
    emit progress(line);
  }
}

void ProcessRun::readStderr() {
  if (!process_) return;
  stderrText_ += process_->readAllStandardError();
  constexpr qsizetype kKeep = 64 * 1024;  // the end holds the launcher's verdict
  if (stderrText_.size() > kKeep) stderrText_.remove(0, stderrText_.size() - kKeep);
}

void ProcessRun::readEvents() {
  const QString path = eventsFileBeside(tracePath_);
  if (!QFileInfo(path).isFile()) return;  // not written yet (and never a FIFO someone put there)
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly) || !file.seek(static_cast<qint64>(eventsReader_.consumed()))) return;
  constexpr qint64 kChunk = 1 << 20;  // a few hundred bytes per event: far more than a poll's worth
  const QByteArray bytes = file.read(kChunk);
  for (const dpv::course::LaunchEvent& e : eventsReader_.feed(std::string_view(bytes.constData(), static_cast<size_t>(bytes.size()))))
    emit launchEvent(e);
}

QString ProcessRun::errorOfRun(int exitCode) const {
  // The launcher's verdict as values (--error-file): "RuntimeError: rank 1 (local rank 1, pid ...)
  // exited with status 2: why", the line dpv prints. Read through the checked read (a regular file,
  // at most 1 MiB) and the checked JSON parse.
  try {
    if (const auto error = dpv::course::read_launcher_error_file(errorFileBeside(tracePath_).toStdString())) {
      const QString message = QString::fromStdString(error->message).simplified();
      if (!message.isEmpty()) return QString::fromStdString(error->error_class) + QStringLiteral(": ") + message;
    }
  } catch (const dpv::Error&) {
    // Not the launcher's document: its stderr below still says what happened.
  }
  // No verdict written (the launcher itself failed to start or crashed): its last words, as they are.
  QStringList lines = QString::fromUtf8(stderrText_).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
  QStringList tail = lines.mid(std::max<qsizetype>(0, lines.size() - 3));
  for (QString& l : tail) l = l.trimmed();
  return tr("dpv exited with status %1%2").arg(exitCode).arg(tail.isEmpty() ? QString() : QStringLiteral(": ") + tail.join(QLatin1Char(' ')));
}

void ProcessRun::onFinished(int exitCode, bool crashed) {
  readStdout();
  readStderr();
  eventsTimer_->stop();
  readEvents();  // the last events (finished) before the end is told
  ProcessRunResult r;
  r.commandLine = commandLine_;
  r.cancelled = cancelled_;
  if (cancelled_) {
    r.error = tr("Cancelled: every worker was stopped.");
  } else if (!stopReason_.isEmpty()) {
    r.error = tr("Stopped: %1 (dpv launch --timeout only bounds each wait; try fewer processes or a smaller batch).").arg(stopReason_);
  } else if (crashed) {
    r.error = tr("The launcher crashed: %1").arg(errorOfRun(exitCode));
  } else if (exitCode != 0) {
    r.error = errorOfRun(exitCode);
  } else if (!QFileInfo::exists(tracePath_)) {
    r.error = tr("dpv finished but wrote no merged trace at %1").arg(tracePath_);
  } else {
    r.ok = true;
    r.tracePath = tracePath_;
  }
  process_->deleteLater();
  process_ = nullptr;
  finish(r);
}

void ProcessRun::onStartError() {
  ProcessRunResult r;
  r.commandLine = commandLine_;
  r.error = tr("Cannot start %1: %2").arg(process_->program(), process_->errorString());
  process_->deleteLater();
  process_ = nullptr;
  finish(r);
}

void ProcessRun::finish(ProcessRunResult result) {
  eventsTimer_->stop();
  wallTimer_->stop();
  killTimer_->stop();
  emit finished(result);
}

}  // namespace gui
