#pragma once
// The Timeline page: a per-device Gantt chart of the measured stage times of the last iteration
// (DeviceState.busy_start/busy_end of the recorded StageEvents), and the bytes and bandwidth of
// every collective (CollectiveReport algbw/busbw). Bars show their numbers on hover.
#include <QVector>

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
  QCustomPlot* plot_;
  QLabel* summary_;
  QLabel* emptyHint_;
  QPushButton* runButton_;
  QTableWidget* table_;
  QHBoxLayout* legend_;
  QVector<Bar> bars_;
};

}  // namespace gui
