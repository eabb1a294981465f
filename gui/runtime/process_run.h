#pragma once
// Runs the app's model as world real processes: `dpv launch --nproc-per-node world -- train --ddp ...` in a
// QProcess, the `dpv` binary found beside the app, writing its merged trace into a QTemporaryDir.
// The launcher starts the ranks (Gloo over TCP on 127.0.0.1, rank 0 hosting the store on a free
// port); rank 0's progress lines come back as progress(), the end as finished() with the merged
// trace's path or the launcher's error in words. cancel() sends SIGTERM to the launcher, which
// stops every worker; a job that outlives its wall-clock limit is cancelled the same way, and a
// launcher that does not exit after SIGTERM is killed, so a run never hangs the app.
// Lives on the GUI thread: QProcess reports through signals, nothing blocks.
#include <QObject>
#include <QString>
#include <QStringList>
#include <memory>

#include "course/launch_events.h"
#include "engine/run/run_spec.h"

class QProcess;
class QTemporaryDir;
class QTimer;

namespace gui {

struct ProcessRunRequest {
  QString dpvPath;        // the dpv binary; empty: findDpv() beside the app
  // What the ranks train, as the app's run (runSpecFromSettings): devices (cpu:K runs world processes
  // over Gloo, cuda:... one GPU each over NCCL), preset, the global batch (DistributedSampler gives
  // each rank its strided share), lr, seed and SyncBatchNorm. The ranks always run DDP with dpv
  // train's own bucket sizes: arguments() reads neither `strategy` nor `ddp`.
  dpv::RunSpec run = defaultRun();
  int steps = 3;          // iterations trained
  int traceSteps = 0;     // the first iterations traced (--trace-steps); 0: all of them
  double timeoutS = 60;   // dpv launch --timeout: how long a rank waits for the store or a collective
  double wallLimitS = 180;  // the whole job: past this it is stopped as by Cancel, with an error
  QStringList extraTrainArguments;  // appended to `dpv train` (e.g. an option the user typed)
  // The fault lab: --events-file in the run's folder (its events come as launchEvent()), and
  // --max-restarts N with `train --checkpoint <folder>/checkpoints --checkpoint-every 1` when N > 0.
  bool events = false;
  int maxRestarts = 0;

  // The app's default settings as a run (batch 10, lr 0.01, ...), what a bare request trains.
  static dpv::RunSpec defaultRun();
};

struct ProcessRunResult {
  bool ok = false;
  bool cancelled = false;
  QString tracePath;    // the merged trace (a process per rank) when ok; valid until the next start()
  QString error;        // in words: the launcher's message with the failed rank, or why dpv did not start
  QString commandLine;  // what ran, for the page and its tooltip
};

class ProcessRun : public QObject {
  Q_OBJECT
 public:
  explicit ProcessRun(QObject* parent = nullptr);
  ~ProcessRun() override;  // a job in flight is stopped (SIGTERM, then SIGKILL) before the object goes

  // The dpv binary beside this program: the same folder (installed: bin/dpviz and bin/dpv), or the
  // build tree's cli/dpv seen from gui/ or tests/gui/. "" when none is there; `searched` lists where.
  static QString findDpv(QStringList* searched = nullptr);
  // How many processes `devices` asks for (cpu:K or cuda:0,1,...); 0 with `error` set when it cannot run as processes.
  static int processCount(const QString& devices, QString* error);
  // dpv's arguments for `request`, writing the merged trace to `tracePath`: the one place the
  // request's RunSpec becomes a dpv command line.
  static QStringList arguments(const ProcessRunRequest& request, const QString& tracePath);
  // The --error-file the arguments name: error.json in the trace's folder; and the --events-file
  // (events.jsonl) and checkpoint folder the same way.
  static QString errorFileBeside(const QString& tracePath);
  static QString eventsFileBeside(const QString& tracePath);
  static QString checkpointsBeside(const QString& tracePath);
  // The traces the ranks of the last job wrote themselves (T.rank<r>.json beside T), by rank.
  QStringList rankTracesWritten() const;

  // Starts the job unless one is running; returns false (and emits finished() with the error) when it cannot start.
  bool start(const ProcessRunRequest& request);
  void cancel();  // SIGTERM to the launcher, which forwards it to every worker; finished() follows with cancelled
  bool running() const { return process_ != nullptr; }
  QString lastProgress() const { return lastProgress_; }
  QString workFolder() const;  // the run's temporary folder (its traces); "" before the first start

 signals:
  void progress(const QString& line);  // rank 0's latest progress line (or the launcher's header line)
  void launchEvent(const dpv::course::LaunchEvent& event);  // with request.events: the launcher's events, in order
  void finished(const gui::ProcessRunResult& result);

 private:
  void readStdout();
  void readStderr();
  void readEvents();  // the events file's new whole lines (polled: the launcher appends to it)
  void onFinished(int exitCode, bool crashed);
  void onStartError();
  void stop(const QString& reason);  // SIGTERM now, SIGKILL after the launcher's grace period
  void finish(ProcessRunResult result);
  // The job's error: the launcher's --error-file when it wrote one, else its last stderr lines.
  QString errorOfRun(int exitCode) const;

  QProcess* process_ = nullptr;
  QTimer* wallTimer_;
  QTimer* killTimer_;
  QTimer* eventsTimer_;
  dpv::course::LaunchEventsReader eventsReader_;
  std::unique_ptr<QTemporaryDir> dir_;
  QString tracePath_, commandLine_, stopReason_;
  QByteArray stdoutPartial_, stderrText_;
  QString lastProgress_;
  bool cancelled_ = false;
};

}  // namespace gui

Q_DECLARE_METATYPE(gui::ProcessRunResult)
