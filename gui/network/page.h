#pragma once
// The "Network" page: what the network costs DDP. The learner picks a link (rate, one-way delay), a
// DDP communication hook, the bucket cap, the model and the ranks; "Run" trains a few DDP steps over
// the REAL shaped link where the app may make one (CAP_NET_ADMIN: the worker runs `dpv lab network`,
// two network namespaces joined by a veth pair under tc tbf) and otherwise, or when the learner
// unticks "real link", on in-process ranks over a SIMULATED link (the delays come from the
// alpha-beta cost model, no packet crosses a network), saying which and why from the result's
// facts (course::network_link_text). The page shows what came back: a timeline of the last step (each rank's backward per layer and its bucket
// all-reduces, the model's buckets as ghosts, the exposed time), the measured step beside the
// model's prediction, and the `sudo dpv lab network` command for the same point (the one the real
// run runs, from the same builder). "Predict first" asks for a guess of the step time before the run and grades it
// (course::grade_step_guess). The page computes none of the numbers it shows.
#include <QString>
#include <optional>

#include "course/network_guess.h"
#include "gui/common/page.h"
#include "gui/network/worker.h"
#include "gui/runtime/generation.h"
#include "gui/runtime/worker_thread.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QScrollArea;
class QTextBrowser;

namespace gui {

class NetworkTimelineChart;

class NetworkPage : public Page {
  Q_OBJECT
 public:
  // `runner`: what a simulated run computes; empty for course::run_simulated_network_point.
  // `facts`: the privilege and the dpv binary; empty to find them (findRealLinkFacts). Tests give both.
  explicit NetworkPage(AppContext* context, QWidget* parent = nullptr, NetworkWorker::Runner runner = {},
                       std::optional<dpv::course::RealLinkFacts> facts = std::nullopt);
  ~NetworkPage() override;  // stops the lab's child (SIGTERM) and waits for a point under way
  QList<Shot> screenshots() override;
  bool usesSettingsBar() const override { return false; }  // the page has its own model and ranks

  NetworkRequest request() const;  // what "Run" would run now, from the controls
  void run();
  void cancel();
  bool running() const { return running_; }
  void showResult(const NetworkResult& result);  // the worker's replies come here

  // --- Controls and state, for tests and screenshots.
  void setLink(int rateIndex, double delayMs);
  void setHook(dpv::CommHookKind kind);
  void setModel(const QString& preset, int ranks, double bucketCapMb);
  void setPredictFirst(bool on, double guessMs);
  void setRealLink(bool on);  // only where the real link is offered (realLinkOffered)
  bool realLinkOffered() const;
  QString realLinkToolTip() const;
  QString statusText() const;
  const NetworkResult& result() const { return result_; }
  QString errorText() const { return error_; }
  QString simulatedText() const;
  QString commandText() const;
  QString figuresText() const;
  QString gradeText() const;
  QString lessonsMarkdown() const { return lessonsMarkdown_; }  // the lessons as rendered for the shown run
  NetworkTimelineChart* timeline() const { return timeline_; }
  QPushButton* runButton() const { return runButton_; }

 signals:
  void resultShown();
  void failed(const QString& message);
  void runRequested(const gui::NetworkRequest& request, quint64 generation);  // to the worker (queued)
  void stopRequested();  // to the worker (queued): SIGTERM to the lab's child
  void stoppedShown();   // the lab's child ended by Stop

 private:
  QWidget* buildLinkControls();
  QWidget* buildRunControls();
  QWidget* buildBody();
  void onFinished(const NetworkResult& result, quint64 generation);
  void onFailed(const QString& message, quint64 generation);
  void onStopped(quint64 generation);
  void onRealLabStarted(const QString& command, bool probe, quint64 generation);
  void setBusy(bool busy);
  void showNextRun();
  QString figuresHtml(const dpv::course::NetworkLabPoint& point) const;
  void showLessons(const dpv::course::NetworkLabPoint& point);

  QScrollArea* scroll_;
  QComboBox* rate_;
  QDoubleSpinBox* delay_;
  QComboBox* hook_;
  QComboBox* model_;
  QComboBox* ranks_;
  QDoubleSpinBox* bucketCap_;
  QCheckBox* predictFirst_;
  QCheckBox* realLink_;  // "real link (needs root)": enabled where the facts allow it
  QDoubleSpinBox* guess_;
  QPushButton* runButton_;
  QPushButton* cancelButton_;
  QLabel* status_;
  QProgressBar* busy_;  // shown while a point runs (the real lab takes 10-30 s)
  QLabel* simulated_;  // written from the result's `simulated` fact
  QLabel* command_;    // the real-link command for the controls' settings
  QLabel* figures_;
  QLabel* grade_;
  NetworkTimelineChart* timeline_;
  QTextBrowser* lessons_;  // lessons/network/*.md written from the shown run's facts
  QString lessonsMarkdown_;
  NetworkResult result_;
  NetworkRequest shown_;  // the request whose reply is shown (its guess graded)
  double shownGuessMs_ = 0;  // the guess made before the shown run; 0 for none
  double pendingGuessMs_ = 0;
  QString error_;
  bool running_ = false;
  dpv::course::RealLinkFacts facts_;
  Generation generation_;  // declared before the thread: the worker reads it until the thread has stopped
  WorkerThread<NetworkWorker> worker_;
};

}  // namespace gui
