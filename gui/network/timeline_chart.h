#pragma once
// The Network page's timeline of one measured DDP step (the run's last): per rank a row of its
// backward, layer by layer, and a row of its bucket all-reduces as measured, with the cost model's
// predicted bucket bars (engine/netmodel/ddp_step_model.h predict_ddp_step on the same step's
// facts) drawn as translucent ghosts behind them, and the communication the backward did not hide
// (the step's exposed time) marked. Every start and end is the engine's; the widget only lays the
// bars out on a time axis.
#include <QString>
#include <QWidget>
#include <vector>

#include "gui/network/worker.h"

namespace gui {

class NetworkTimelineChart : public QWidget {
  Q_OBJECT
 public:
  enum class BarKind { Forward, Backward, Bucket, GhostBucket, Exposed };
  struct Bar {
    int rank = 0;
    BarKind kind = BarKind::Backward;
    double start = 0, end = 0;  // seconds from the start of the step
    int index = 0;              // the layer (Backward) or the bucket (Bucket, GhostBucket)
  };

  explicit NetworkTimelineChart(QWidget* parent = nullptr);
  // Shows `point`'s last step on every rank; an empty result clears the chart.
  void setPoint(const NetworkResult& point);
  const std::vector<Bar>& bars() const { return bars_; }
  int rankCount() const { return ranks_; }
  int countBars(int rank, BarKind kind) const;
  double axisEnd() const { return axis_end_; }  // seconds the time axis spans
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  void paintBars(class QPainter& painter, const QRectF& plot) const;
  void paintAxis(class QPainter& painter, const QRectF& plot) const;
  void paintLegend(class QPainter& painter, const QRectF& area) const;  // wraps onto more lines when narrow
  double legendHeight(double width) const;  // px the legend takes at `width`

  std::vector<Bar> bars_;
  int ranks_ = 0;
  double rowHeight_ = 26;  // px, set for the widget's height when it paints
  double axis_end_ = 0;
};

}  // namespace gui
