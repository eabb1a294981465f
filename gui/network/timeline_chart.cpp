#include "gui/network/timeline_chart.h"

#include <QPainter>
#include <QPainterPath>
#include <algorithm>

#include "engine/netmodel/ddp_step_model.h"

namespace gui {

namespace {

// px around the plot (kTop: room for a legend on two lines, the minimum size)
constexpr double kLeft = 118, kRight = 16, kTop = 52, kBottom = 34;
constexpr double kRowGap = 6, kRankGap = 14;
constexpr double kMinRowHeight = 26, kMaxRowHeight = 64;  // rows grow with the widget, up to this

const QColor kForward(120, 144, 156);
const QColor kBackward(66, 133, 244);
const QColor kBucket(255, 152, 0);
const QColor kExposed(229, 57, 53);

// The bars of one rank's measured step: its forward, its backward layer by layer (the backward runs
// the last layer first, each layer for the time the step measured for it), its buckets as
// measured, the model's buckets for the same facts, and the exposed communication.
void addRankBars(int rank, const dpv::netmodel::StepMeasure& m, const dpv::netmodel::Link& link,
                 std::vector<NetworkTimelineChart::Bar>& bars) {
  using Kind = NetworkTimelineChart::BarKind;
  bars.push_back({rank, Kind::Forward, 0, m.facts.forward_s, 0});
  double t = m.facts.forward_s;
  for (int layer = static_cast<int>(m.facts.backward_s.size()) - 1; layer >= 0; --layer) {
    const double d = m.facts.backward_s[static_cast<size_t>(layer)];
    bars.push_back({rank, Kind::Backward, t, t + d, layer});
    t += d;
  }
  for (size_t i = 0; i < m.buckets.size(); ++i)
    bars.push_back({rank, Kind::Bucket, m.buckets[i].start, m.buckets[i].end, static_cast<int>(i)});
  const dpv::netmodel::DdpStepPrediction predicted = dpv::netmodel::predict_ddp_step(m.facts, link);
  for (size_t i = 0; i < predicted.buckets.size(); ++i)
    bars.push_back({rank, Kind::GhostBucket, predicted.buckets[i].start, predicted.buckets[i].end, static_cast<int>(i)});
  if (m.exposed_s > 0) bars.push_back({rank, Kind::Exposed, m.backward_end_s, m.backward_end_s + m.exposed_s, 0});
}

}  // namespace

NetworkTimelineChart::NetworkTimelineChart(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("networkTimeline"));
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Minimum);
}

void NetworkTimelineChart::setPoint(const NetworkResult& point) {
  bars_.clear();
  ranks_ = 0;
  axis_end_ = 0;
  if (point) {
    ranks_ = static_cast<int>(point->last_step_by_rank.size());
    for (int r = 0; r < ranks_; ++r) {
      const dpv::netmodel::StepMeasure& m = point->last_step_by_rank[static_cast<size_t>(r)];
      addRankBars(r, m, point->link, bars_);
      axis_end_ = std::max(axis_end_, m.step_s);
    }
    for (const Bar& b : bars_) axis_end_ = std::max(axis_end_, b.end);
  }
  updateGeometry();
  update();
}

int NetworkTimelineChart::countBars(int rank, BarKind kind) const {
  return static_cast<int>(std::count_if(bars_.begin(), bars_.end(), [&](const Bar& b) { return b.rank == rank && b.kind == kind; }));
}

QSize NetworkTimelineChart::minimumSizeHint() const {
  const int rows = std::max(ranks_, 2);
  return {420, static_cast<int>(kTop + kBottom + rows * (2 * kMinRowHeight + kRowGap + kRankGap))};
}

void NetworkTimelineChart::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.setRenderHint(QPainter::Antialiasing);
  painter.fillRect(rect(), palette().base());
  const double legend = legendHeight(width() - kLeft - kRight);
  const QRectF plot(kLeft, legend, std::max(10.0, width() - kLeft - kRight), std::max(10.0, height() - legend - kBottom));
  if (ranks_ == 0 || axis_end_ <= 0) {
    painter.setPen(palette().color(QPalette::PlaceholderText));
    painter.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap, tr("Run a point to see each rank's backward and its bucket all-reduces."));
    return;
  }
  // Each rank's two rows share the height there is, between the readable minimum and a maximum.
  rowHeight_ = std::clamp((plot.height() / ranks_ - kRowGap - kRankGap) / 2, kMinRowHeight, kMaxRowHeight);
  paintLegend(painter, QRectF(kLeft, 4, plot.width(), legend - 8));
  paintBars(painter, plot);
  paintAxis(painter, plot);
}

void NetworkTimelineChart::paintBars(QPainter& painter, const QRectF& plot) const {
  const double rankHeight = 2 * rowHeight_ + kRowGap + kRankGap;
  auto x = [&](double s) { return plot.left() + plot.width() * s / axis_end_; };
  painter.setPen(palette().color(QPalette::Text));
  for (int r = 0; r < ranks_; ++r) {
    const double top = plot.top() + r * rankHeight;
    painter.drawText(QRectF(4, top, kLeft - 10, rowHeight_), Qt::AlignRight | Qt::AlignVCenter, tr("rank %1 compute").arg(r));
    painter.drawText(QRectF(4, top + rowHeight_ + kRowGap, kLeft - 10, rowHeight_), Qt::AlignRight | Qt::AlignVCenter,
                     tr("rank %1 buckets").arg(r));
  }
  for (const Bar& b : bars_) {
    const double top = plot.top() + b.rank * rankHeight;
    const double commTop = top + rowHeight_ + kRowGap;
    QRectF box(x(b.start), top, std::max(1.0, x(b.end) - x(b.start)), rowHeight_);
    switch (b.kind) {
      case BarKind::Forward: painter.fillRect(box.adjusted(0, 4, 0, -4), kForward); break;
      case BarKind::Backward: {
        QColor c = kBackward;
        c = b.index % 2 ? c.lighter(125) : c;  // neighbouring layers told apart
        painter.fillRect(box.adjusted(0, 2, 0, -2), c);
        break;
      }
      case BarKind::GhostBucket: {  // the model's: the row's upper half, translucent, dashed outline
        box.moveTop(commTop);
        box.setHeight(rowHeight_ / 2 - 1);
        QColor fill = palette().color(QPalette::Text);
        fill.setAlpha(45);
        painter.setPen(QPen(palette().color(QPalette::Text), 1, Qt::DashLine));
        painter.setBrush(fill);
        painter.drawRect(box);
        break;
      }
      case BarKind::Bucket:  // measured: the row's lower half, under its ghost
        box.moveTop(commTop + rowHeight_ / 2);
        box.setHeight(rowHeight_ / 2);
        painter.fillRect(box.adjusted(0, 0, -1, 0), b.index % 2 ? kBucket.darker(125) : kBucket);  // neighbours told apart
        break;
      case BarKind::Exposed: {
        box.moveTop(commTop);
        painter.setPen(QPen(kExposed, 2));
        painter.setBrush(Qt::NoBrush);
        painter.drawLine(QPointF(box.left(), box.bottom() + 3), QPointF(box.right(), box.bottom() + 3));
        painter.drawLine(QPointF(box.left(), box.top() - 2), QPointF(box.left(), box.bottom() + 5));
        break;
      }
    }
  }
}

void NetworkTimelineChart::paintAxis(QPainter& painter, const QRectF& plot) const {
  painter.setPen(palette().color(QPalette::Text));
  const double axisY = plot.top() + ranks_ * (2 * rowHeight_ + kRowGap + kRankGap);
  painter.drawLine(QPointF(plot.left(), axisY), QPointF(plot.right(), axisY));
  const double ms = axis_end_ * 1e3;
  const double step = ms > 500 ? 100 : ms > 200 ? 50 : ms > 100 ? 20 : ms > 50 ? 10 : ms > 20 ? 5 : ms > 5 ? 1 : ms > 1 ? 0.25 : 0.05;
  for (double t = 0; t <= ms + 1e-9; t += step) {
    const double px = plot.left() + plot.width() * t / ms;
    painter.drawLine(QPointF(px, axisY), QPointF(px, axisY + 4));
    painter.drawText(QRectF(px - 40, axisY + 5, 80, 16), Qt::AlignHCenter | Qt::AlignTop, QString::number(t, 'g', 4));
  }
  painter.drawText(QRectF(4, axisY + 5, kLeft - 10, 16), Qt::AlignRight | Qt::AlignTop, tr("time (ms)"));
}

void NetworkTimelineChart::paintLegend(QPainter& painter, const QRectF& area) const {
  struct Item { QColor color; QString text; };
  QColor ghost = palette().color(QPalette::Text);
  ghost.setAlpha(45);
  const Item items[] = {{kForward, tr("forward")}, {kBackward, tr("backward, per layer")},
                        {kBucket, tr("bucket all-reduce (measured)")}, {ghost, tr("model's bucket (ghost)")},
                        {kExposed, tr("exposed: not hidden by the backward")}};
  const QFontMetricsF metrics(font());
  const double line = metrics.height() + 4;
  double left = area.left(), y = area.top() + line / 2;
  for (const Item& item : items) {
    const double w = 18 + metrics.horizontalAdvance(item.text) + 16;
    if (left > area.left() && left + w > area.right()) {  // wraps on a narrow window
      left = area.left();
      y += line;
    }
    painter.fillRect(QRectF(left, y - 5, 14, 10), item.color);
    painter.setPen(palette().color(QPalette::Text));
    painter.drawText(QPointF(left + 18, y + metrics.ascent() / 2 - 1), item.text);
    left += w;
  }
}

double NetworkTimelineChart::legendHeight(double width) const {
  const QFontMetricsF metrics(font());
  const QString texts[] = {tr("forward"), tr("backward, per layer"), tr("bucket all-reduce (measured)"),
                           tr("model's bucket (ghost)"), tr("exposed: not hidden by the backward")};
  int lines = 1;
  double left = 0;
  for (const QString& text : texts) {
    const double w = 18 + metrics.horizontalAdvance(text) + 16;
    if (left > 0 && left + w > width) {
      ++lines;
      left = 0;
    }
    left += w;
  }
  return lines * (metrics.height() + 4) + 8;
}

}  // namespace gui
