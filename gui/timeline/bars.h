#pragma once
// What the Timeline page's three views (the last iteration, a measured series, an opened trace)
// share: the stage kinds of the legend, and one bar (with an optional spread whisker) on a row.
#include <QColor>
#include <QPen>
#include <algorithm>
#include <qcustomplot.h>

#include "engine/observer.h"

namespace gui {

inline constexpr dpv::StageKind kTimelineKinds[] = {
    dpv::StageKind::Scatter, dpv::StageKind::Replicate, dpv::StageKind::Forward,     dpv::StageKind::Gather, dpv::StageKind::Loss,
    dpv::StageKind::GradScatter, dpv::StageKind::Backward, dpv::StageKind::ReduceGrads, dpv::StageKind::Step};

// Bars are 0.64 rows tall, centred on the row's y.
inline constexpr double kBarHalfHeight = 0.32;

inline void drawTimelineBar(QCustomPlot* plot, double y, double startMs, double endMs, const QColor& color) {
  auto* rect = new QCPItemRect(plot);
  rect->topLeft->setCoords(startMs, y + kBarHalfHeight);
  rect->bottomRight->setCoords(std::max(endMs, startMs + 1e-6), y - kBarHalfHeight);
  rect->setBrush(color);
  rect->setPen(QPen(color.darker(125)));
  rect->setSelectable(false);
}

// The spread of a measured bar: a line from lowMs to highMs through the bar's middle, with end ticks.
inline void drawTimelineWhisker(QCustomPlot* plot, double y, double lowMs, double highMs, const QColor& color) {
  const QPen pen(color, 1.5);
  auto* line = new QCPItemLine(plot);
  line->start->setCoords(lowMs, y);
  line->end->setCoords(highMs, y);
  line->setPen(pen);
  line->setSelectable(false);
  for (double x : {lowMs, highMs}) {
    auto* tick = new QCPItemLine(plot);
    tick->start->setCoords(x, y - kBarHalfHeight * 0.6);
    tick->end->setCoords(x, y + kBarHalfHeight * 0.6);
    tick->setPen(pen);
    tick->setSelectable(false);
  }
}

}  // namespace gui
