#pragma once
// The Timeline page: a per-device Gantt chart of the measured stage times of the last iteration
// (DeviceState.busy_start/busy_end of the recorded StageEvents), and the bytes and bandwidth of
// every collective (CollectiveReport algbw/busbw). Bars show their numbers on hover.
// File > Open trace shows a Chrome trace from a file instead: one of `dpv train --trace`, or a
// merged multi-process one (`dpv trace merge`, `dpv launch`), with one lane per rank and track.
#include <QVector>
#include <optional>

#include "engine/io/trace_lanes.h"

#include "gui/app/page.h"
#include "gui/runtime/engine_types.h"

class QCustomPlot;
class QLabel;
class QPushButton;
class QTableWidget;
class QHBoxLayout;

namespace gui {

class TimelinePage : public Page {
  Q_OBJECT
 public:
  TimelinePage(AppContext* context, QWidget* parent = nullptr);
  QList<Shot> screenshots() override;
  void refresh();
  void runIteration();  // asks the engine for a whole iteration (the page refreshes when it ends)
  // Shows the Chrome trace in `path` (until the next iteration is run). Returns "" or the error.
  QString openTrace(const QString& path);
  bool showingOpenedTrace() const { return opened_.has_value(); }
  int laneCount() const { return opened_ ? static_cast<int>(opened_->lanes.size()) : 0; }

  // For tests: what is drawn.
  struct Bar {
    int row;          // 0: the whole iteration's stages; 1 + d: device d
    double startMs, endMs;
    int stageKind;
    QString text;     // the hover text
  };
  const QVector<Bar>& bars() const { return bars_; }
  int collectiveRows() const;
  QString summary() const;
  QCustomPlot* plot() const { return plot_; }

 signals:
  void refreshed();

 private:
  void applyTheme();
  void onMouseMove(QMouseEvent* event);
  void drawOpenedTrace();
  QCustomPlot* plot_;
  QLabel* summary_;
  QLabel* emptyHint_;
  QPushButton* runButton_;
  QTableWidget* table_;
  QHBoxLayout* legend_;
  QVector<Bar> bars_;
  std::optional<dpv::TraceLanes> opened_;
  QString openedPath_;
};

}  // namespace gui
