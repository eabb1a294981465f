#include "gui/common/flight.h"

#include <QGraphicsObject>
#include <QParallelAnimationGroup>
#include <QPropertyAnimation>
#include <QSequentialAnimationGroup>

namespace gui {

int flightStagger(int durationMs) { return durationMs * 2 / 5; }

QAbstractAnimation* makeFlight(QGraphicsObject* chip, const QList<QPointF>& path, int durationMs, int order) {
  auto* move = new QPropertyAnimation(chip, "pos");
  move->setDuration(durationMs);
  move->setEasingCurve(QEasingCurve::InOutCubic);
  if (!path.isEmpty()) {
    move->setStartValue(path.first());
    for (int i = 1; i + 1 < path.size(); ++i) move->setKeyValueAt(static_cast<qreal>(i) / (path.size() - 1), path[i]);
    move->setEndValue(path.last());
  }
  auto* fade = new QPropertyAnimation(chip, "opacity");
  fade->setStartValue(0.95);
  fade->setKeyValueAt(0.8, 0.9);
  fade->setEndValue(0.0);
  fade->setDuration(durationMs);
  auto* flight = new QSequentialAnimationGroup();
  if (order > 0) flight->addPause(order * flightStagger(durationMs));
  auto* both = new QParallelAnimationGroup();
  both->addAnimation(move);
  both->addAnimation(fade);
  flight->addAnimation(both);
  return flight;
}

}  // namespace gui
