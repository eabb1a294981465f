#pragma once
// The Timeline page's fault lab, beside "Run as W processes": the learner picks a rank, a fault
// (kill -9, SIGSTOP: a hang, SIGTERM) and a moment (after step k, or "now" by hand), and whether the
// job may restart from its checkpoints; the run goes through the page's ProcessRun with the
// launcher's events file, the app sends the signal itself to that rank's pid (from the events) when
// rank 0 reports step k, and the panel shows each rank's status, the launcher's verdict, and the
// lesson lessons/ddp/faults.md written from this run's facts (course/fault_facts.h).
#include <QElapsedTimer>
#include <QWidget>
#include <optional>

#include "course/fault_facts.h"
#include "gui/runtime/process_run.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTextBrowser;

namespace gui {

class AppContext;
class TimelinePage;

class FaultLabPanel : public QWidget {
  Q_OBJECT
 public:
  // The job lasts seconds, so the fault lands while the ranks train: the app sends it when it reads
  // rank 0's "step k" line, and a small model's DDP step takes well under a millisecond, so a short
  // job would be over before the signal came. A checkpoint after every step (a restart) makes a step
  // some milliseconds; by hand ("Send now") the learner needs ten times longer. Only the first
  // kLabTraceSteps iterations are traced, so the trace stays small.
  static constexpr int kLabSteps = 5000;
  static constexpr int kLabStepsWithCheckpoints = 300;
  static constexpr int kByHandFactor = 10;
  static constexpr int kLatestFaultStep = 20;  // the "after step k" choices end here, far before the end
  static constexpr int kLabTraceSteps = 6;
  static int labSteps(bool restart, bool byHand) {
    return (restart ? kLabStepsWithCheckpoints : kLabSteps) * (byHand ? kByHandFactor : 1);
  }
  static constexpr double kLabTimeoutS = 15;  // dpv launch --timeout: how long a hang goes unseen

  FaultLabPanel(AppContext* context, TimelinePage* page, ProcessRun* run, QWidget* parent = nullptr);

  // The plan the controls describe, and the request that runs it (the page's settings, with the
  // events file, and --max-restarts 1 with checkpoints when restarting is ticked).
  dpv::course::FaultPlan plan() const;
  ProcessRunRequest request() const;
  void setPlan(const dpv::course::FaultPlan& plan);  // sets the controls (tests, screenshots)
  void start();      // runs the job with the fault: startWith(request())
  void startWith(const ProcessRunRequest& request);
  void sendNow();    // the fault now, to the rank's running process
  bool active() const { return lab_.has_value() && ownsRun_; }
  // SIGCONT to a rank this lab stopped, while its job runs: a stopped process acts on no signal
  // but SIGKILL, so the app does this before it stops the job on its way out.
  void continueStoppedRank();
  const std::optional<dpv::course::FaultLab>& lab() const { return lab_; }
  QString rankStatusText(int rank) const;  // the status column of the rank's row ("" when none)
  QString verdict() const;
  QString lessonText() const;

 signals:
  void labFinished();  // the job ended and the panel shows how

 private:
  void onEvent(const dpv::course::LaunchEvent& event);
  void onOutput(const QString& line);
  void onFinished(const ProcessRunResult& result);
  void sendIfDue();
  void showRanks();
  void showLesson();
  void updateControls();
  AppContext* context_;
  TimelinePage* page_;
  ProcessRun* run_;
  QSpinBox* rank_;
  QComboBox* fault_;
  QSpinBox* afterStep_;
  QCheckBox* restart_;
  QPushButton* startButton_;
  QPushButton* sendNowButton_;
  QTableWidget* ranks_;
  QLabel* verdict_;
  QTextBrowser* lesson_;
  std::optional<dpv::course::FaultLab> lab_;
  bool ownsRun_ = false;  // the page's ProcessRun is running this lab's job
  QElapsedTimer sinceFault_;
  double secondsToEnd_ = 0;
};

}  // namespace gui
