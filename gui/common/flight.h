#pragma once
// One chip flying across a scene: DataParallel's gathers and reduces, DDP's shards, broadcasts,
// bucket all-reduces and averaged gradients. The chip moves along a path and fades out as it
// arrives, where the picture of the new state shows what it carried. Flights of a later `order`
// set off a stagger later, so chips heading for the same place arrive one after the other
// instead of as one blur.
#include <QList>
#include <QPointF>

class QAbstractAnimation;
class QGraphicsObject;

namespace gui {

// Milliseconds between the departures of two consecutive orders: 40% of a flight. At 1x (700 ms)
// a new chip sets off every 280 ms, so the eye can follow each one.
int flightStagger(int durationMs);

// The animation of `chip` along `path` (first point to last, through any corners, the same time
// for every leg), `durationMs` long after a wait of `order` staggers. The caller owns the chip and
// adds the animation to its group (which then owns it); the chip's opacity before it sets off is
// the caller's choice.
QAbstractAnimation* makeFlight(QGraphicsObject* chip, const QList<QPointF>& path, int durationMs, int order = 0);

}  // namespace gui
