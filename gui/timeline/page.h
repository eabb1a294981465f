#pragma once
// The Timeline page: a per-device Gantt chart of DataParallel's stages, measured by the engine.
// "Measure" runs several whole iterations off the GUI thread (course/timeline_series.h) and draws
// each stage's median with its spread (min..max whiskers), the speed-up against one device as a
// number, and says when simulated devices are threads sharing fewer cores. Until then the chart
// shows the last iteration the engine ran (one sample). Beside it: the bytes and bandwidth of every
// collective, and the lesson lessons/timeline.md.
// File > Open trace shows a Chrome trace from a file instead: one of `dpv train --trace`, or a
// merged multi-process one (`dpv trace merge`, `dpv launch`), with one lane per rank and track.
// "Run as W processes" makes such a trace itself: the current model, batch and devices trained as
// world real processes by `dpv launch` (gui/runtime/process_run.h), then opened here. Beside it, in
// the side panel's "Fault lab" tab (fault_lab.h), the same run with a fault sent to one rank.
#include <QVector>
#include <atomic>
#include <memory>
#include <optional>

#include "course/timeline_series.h"
#include "engine/io/trace_lanes.h"

#include "gui/common/page.h"
#include "gui/runtime/engine_types.h"
#include "gui/runtime/generation.h"
#include "gui/runtime/process_run.h"

class QCustomPlot;
class QLabel;
class QPushButton;
class QScrollArea;
class QTabWidget;
class QTableWidget;
class QTextBrowser;
class QVBoxLayout;

namespace gui {

class FaultLabPanel;
class OffThreadRunner;

class TimelinePage : public Page {
  Q_OBJECT
 public:
  static constexpr int kMeasuredIterations = 7;

  TimelinePage(AppContext* context, QWidget* parent = nullptr);
  ~TimelinePage() override;
  QList<Shot> screenshots() override;
  void refresh();
  void runIteration();   // asks the engine for a whole iteration (the page refreshes when it ends)
  void measure();        // times kMeasuredIterations iterations (and one device) off the GUI thread
  bool measuring() const;
  // Reads the Chrome trace in `path` on a thread of its own, with a notice and "Cancel loading" on
  // the page, then shows it (until the next iteration is run); traceLoadFinished() tells how it
  // ended, and a failure is also a banner on the page. Returns false (nothing started) while
  // another trace is loading. `command`: the dpv command line that wrote it (Run as processes).
  bool openTrace(const QString& path, const QString& command = QString());
  void cancelTraceLoad();  // the parse stops within milliseconds; what was shown stays
  bool loadingTrace() const;
  QString traceStatus() const;  // the loading notice or the failure banner ("" when hidden)
  // A trace's lanes beyond these are not drawn (a notice says how many are): rows stay readable and
  // a 100,000-lane trace still draws its first lanes instead of nothing.
  static constexpr int kMaxDrawnLanes = 64;
  static constexpr int kMaxDrawnSpans = 10000;  // each bar is a plot item: more would freeze the window
  QString drawCapText() const;  // "Showing the first 64 of 100000 lanes …", "" when all are drawn
  enum class TraceLoadEnd { Shown, Failed, Cancelled };
  Q_ENUM(TraceLoadEnd)
  bool showingOpenedTrace() const { return opened_.has_value(); }
  int laneCount() const { return opened_ ? static_cast<int>(opened_->lanes.size()) : 0; }
  // After a DDP iteration of the engine: its lanes as a DDP trace has them (host; per rank its
  // compute lane, then its communication lane). Empty unless the last refresh drew one.
  const dpv::TraceLanes& ddpLanes() const { return ddpLanes_; }
  // The lanes of the opened trace (a file, or the last run as processes).
  const std::optional<dpv::TraceLanes>& openedLanes() const { return opened_; }

  // Runs the current settings as real processes (dpv launch ... -- train --ddp) and opens their
  // merged trace; progress, errors and the end come as processStatus() and processRunFinished().
  static constexpr int kProcessSteps = 3;  // iterations each process trains, all traced
  ProcessRunRequest processRequest() const;  // from the settings bar
  void runAsProcesses(const ProcessRunRequest& request);
  void cancelProcesses();
  bool processesRunning() const;
  QString processStatus() const;  // the line under the chart: progress, or the error in words
  bool processButtonEnabled() const;
  const ProcessRun* processRunner() const { return processRun_; }
  FaultLabPanel* faultLab() const { return faultLab_; }
  void showFaultLab();  // brings the fault lab's tab to the front

  // For tests: what is drawn.
  struct Bar {
    int row;          // 0: the whole iteration's stages; 1 + d: device d
    double startMs, endMs;
    int stageKind;
    QString text;     // the hover text
    double lowMs = -1, highMs = -1;  // a measured series: where the spread's whisker runs (-1: none)
  };
  const QVector<Bar>& bars() const { return bars_; }
  const std::optional<dpv::course::TimelineSeries>& series() const { return series_; }
  int collectiveRows() const;
  QString summary() const;
  QString runCaption() const;  // "Data: model … · seed … · batch … · mode · devices": whose numbers these are
  QString speedupText() const;
  QString coresNote() const;  // "" when the devices are not threads sharing fewer cores
  QString lessonText() const;
  QString legendText() const;  // the colour key as plain text: the stages drawn, "Bucket all-reduce" when there are any
  QCustomPlot* plot() const { return plot_; }
  QScrollArea* plotScroll() const { return plotScroll_; }

 signals:
  void refreshed();
  void measured(bool ok);
  void processRunFinished(bool ok);
  void processProgress(const QString& line);  // rank 0's progress line, as it is shown
  void traceLoadFinished(gui::TimelinePage::TraceLoadEnd end, const QString& error);  // error: "" unless Failed

 private:
  void applyTheme();
  void showLegend();  // legendKinds_ (and the all-reduce grey) as one wrapped line
  void loadLesson();
  void onMouseMove(QMouseEvent* event);
  void setRows(const QStringList& labels);  // y axis ticks, top to bottom; sizes the plot to scroll
  void drawLastIteration();
  void drawSeries();
  void drawOpenedTrace();
  double drawLanes(const dpv::TraceLanes& lanes);  // one row per lane; returns the last end in ms
  void showDrawCap(int lanes, int drawnLanes, size_t spans, size_t spansOnDrawnLanes, size_t drawnSpans);
  void buildTraceLoadRow(QVBoxLayout* layout);
  void onTraceLoaded(const QString& path, const QString& command, bool cancelled, std::optional<dpv::TraceLanes> lanes,
                     const QString& error);
  void drawDdpIteration(const QVector<dpv::StageEvent>& events, const IterationInfo& info, bool complete);
  void addCollectiveRows(const dpv::StageEvent& event);
  void showSeriesNumbers();
  void updateProcessButton();
  void onProcessRunFinished(const ProcessRunResult& result);
  void onProcessTraceLoaded(TraceLoadEnd end, const QString& error);
  void showProcessFailure(const QString& error, bool cancelled, const QString& commandLine);
  void openRankTracesOfFailedRun(const QString& commandLine);  // those the ranks wrote before it failed
  bool processTracePending_ = false;  // the run as processes ended and its trace is loading
  QCustomPlot* plot_;
  QScrollArea* plotScroll_;
  QLabel* summary_;
  QLabel* runCaption_;
  QLabel* speedup_;
  QLabel* cores_;
  QLabel* emptyHint_;
  QPushButton* measureButton_;
  QPushButton* runButton_;
  QPushButton* processButton_;
  QPushButton* cancelButton_;
  QLabel* processStatus_;
  ProcessRun* processRun_ = nullptr;
  QString openedCommand_;  // the dpv command that made the opened trace ("" for a file)
  QTableWidget* table_;
  QTextBrowser* lesson_;
  QTabWidget* sideTabs_;
  FaultLabPanel* faultLab_;
  QLabel* legend_;  // the stage colours, one wrapped line (it never sets the page's width)
  QList<int> legendKinds_;       // the stage kinds drawn (DataParallel's nine until a trace says otherwise)
  bool legendAllReduce_ = false;  // a trace's bucket all-reduces (grey) are drawn
  QVector<Bar> bars_;
  int rows_ = 0;
  std::optional<dpv::TraceLanes> opened_;
  dpv::TraceLanes ddpLanes_;
  QString openedPath_;
  std::optional<dpv::course::TimelineSeries> series_;
  QString seriesError_;
  Generation seriesGeneration_;  // new settings make a measurement in flight stale
  std::shared_ptr<std::atomic<bool>> cancel_;
  OffThreadRunner* runner_;
  OffThreadRunner* traceRunner_ = nullptr;  // File > Open trace: one load at a time
  std::shared_ptr<std::atomic<bool>> traceLoadCancel_;
  QLabel* traceStatus_ = nullptr;
  QPushButton* traceCancelButton_ = nullptr;
  QLabel* drawCapNotice_ = nullptr;
};

// DDP: the seconds of bucket all-reduce that ran while the same rank's Backward stages were busy,
// and (in commSeconds) all bucket all-reduce seconds, from one iteration's events.
double ddpOverlapSeconds(const QVector<dpv::StageEvent>& events, double* commSeconds);
// " (N ms of waiting before and between steps left out)", or "" when the iteration never waited.
QString idleText(const dpv::course::IterationWork& work);

}  // namespace gui
