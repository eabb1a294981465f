// The DDP view's flights: chips flying over the new state's picture from where the stage takes
// them from (the sampler's indices, rank 0's state and buffers, gradients into buckets, buckets
// round the ring, the averaged gradients into .grad, the step into the weights).
#include <QGraphicsRectItem>
#include <QGraphicsSimpleTextItem>
#include <QParallelAnimationGroup>
#include <QSequentialAnimationGroup>
#include <QVariantAnimation>

#include "gui/common/flight.h"
#include "gui/ddp/scene.h"
#include "gui/ddp/scene_geometry.h"

namespace gui {

using namespace ddp_geometry;

ChipItem* DdpScene::addFlight(const QString& label, dpv::TensorRole role, const QList<QPointF>& path, QSizeF size, int order) {
  ChipView view;
  view.role = role;
  view.text = label;
  view.synthesized = true;  // coloured by its role
  auto* ghost = new ChipItem(view, size.width(), size.height(), theme_);
  ghost->setZValue(5);
  ghost->setAcceptedMouseButtons(Qt::NoButton);
  ghost->setPos(path.first());
  ghost->setOpacity(0.0);  // invisible until it sets off: chips waiting at one place do not pile up
  addItem(ghost);
  ghosts_.append(ghost);
  group_->addAnimation(makeFlight(ghost, path, duration_, order));
  return ghost;
}

void DdpScene::revealOnArrival(QGraphicsItem* item, int order) {
  item->setOpacity(0.0);
  auto* show = new QVariantAnimation();
  show->setStartValue(0.0);
  show->setEndValue(1.0);
  show->setDuration(duration_ / 5);
  connect(show, &QVariantAnimation::valueChanged, this, [item](const QVariant& v) { item->setOpacity(v.toReal()); });
  auto* wait = new QSequentialAnimationGroup();
  wait->addPause(order * flightStagger(duration_) + duration_ * 4 / 5);
  wait->addAnimation(show);
  group_->addAnimation(wait);
}

void DdpScene::addSampleFlights() {
  const int world = static_cast<int>(state_.ranks.size());
  auto at = [](const QGraphicsItem* item) { return item ? item->sceneBoundingRect().topLeft() : QPointF(); };
  // Every index leaves the sampler's strip at once, like cards dealt: position p = k*world + r
  // goes to cell k of rank r, so two chips never cross (a later position is never in an
  // earlier cell) and the ranks' rows keep them apart vertically.
  const qint64 total = stripCells_.size();
  for (int r = 0; r < world; ++r) {
    const QList<QGraphicsRectItem*> cells = samples_.value(r);
    for (int k = 0; k < cells.size(); ++k) {
      const qint64 p = static_cast<qint64>(k) * world + r;
      if (p >= total) continue;
      const QRectF cell = cells[k]->sceneBoundingRect();
      addFlight(QString::number(state_.ranks[r].samples[k].index), dpv::TensorRole::Input,
                {at(stripCells_[p]), cell.topLeft()}, cell.size(), 0);
      revealOnArrival(cells[k], 0);
    }
  }
}

void DdpScene::addFlights(const DdpSceneState& previous) {
  using K = dpv::StageKind;
  const int world = static_cast<int>(state_.ranks.size());
  auto at = [](const QGraphicsItem* item) { return item ? item->sceneBoundingRect().topLeft() : QPointF(); };
  switch (state_.kind) {
    case K::Sample: addSampleFlights(); break;
    case K::Construct:
    case K::BroadcastBuffers: {
      // Rank 0's parameters and buffers (at construction) or its buffers (each forward) to every
      // other rank, one rank after the other.
      const bool params = state_.kind == K::Construct;
      for (int r = 1; r < world; ++r) {
        if (params && params_.value(0) && params_.value(r))
          addFlight(tr("rank 0's weights"), dpv::TensorRole::Param, {at(params_.value(0)), at(params_.value(r))}, kStateChip, r - 1);
        if (buffers_.value(0) && buffers_.value(r))
          addFlight(tr("rank 0's buffers"), dpv::TensorRole::Optimizer, {at(buffers_.value(0)), at(buffers_.value(r))}, kStateChip, r - 1);
      }
      break;
    }
    case K::Backward:
    case K::Finalize: {
      // Fresh gradients into their buckets (×1/world), from the layer that made them.
      int order = 0;
      bool filled = false;
      for (int r = 0; r < world && state_.kind == K::Backward; ++r) {
        const DdpRankView& now = state_.ranks[r];
        const DdpRankView* before = r < previous.ranks.size() ? &previous.ranks[r] : nullptr;
        int k = 0;
        for (const DdpBucketView& b : now.buckets) {
          const int was = before && b.bucket < before->buckets.size() && before->buckets[b.bucket].params == b.params
                              ? before->buckets[b.bucket].ready
                              : 0;
          if (b.ready <= was) continue;
          const QPointF from(columnX(r, world) + kActX + kActW - kSmallChip.width(), rowTop(r, world, rowH()) + kCellY + 5);
          addFlight(QStringLiteral("+%1").arg(b.ready - was), dpv::TensorRole::Grad,
                    {from, at(buckets_.value(key(r, b.bucket))) + QPointF(2, 5)}, kSmallChip, k++);
          filled = true;
        }
      }
      // The ring starts once the gradients have arrived (three staggers > one flight), so a
      // bucket's chip never sets off from under the gradient still landing in it.
      if (filled) order = 3;
      // Every bucket launched in this stage goes round the ring, in bucket order: each rank
      // sends to the next, the last back up to rank 0 along the ring.
      const DdpRankView* now0 = world > 0 ? &state_.ranks[0] : nullptr;
      const DdpRankView* before0 = previous.ranks.isEmpty() ? nullptr : &previous.ranks[0];
      auto launched = [](BucketPhase p) { return p == BucketPhase::AllReducing || p == BucketPhase::Done; };
      for (const DdpBucketView& b : now0 ? now0->buckets : QList<DdpBucketView>()) {
        const bool was = before0 && b.bucket < before0->buckets.size() && before0->buckets[b.bucket].params == b.params &&
                         launched(before0->buckets[b.bucket].phase);
        if (!launched(b.phase) || was || world < 2) continue;
        for (int r = 0; r < world; ++r) {
          const int next = (r + 1) % world;
          const QPointF from = at(buckets_.value(key(r, b.bucket))) + QPointF(2, 5);
          const QPointF to = at(buckets_.value(key(next, b.bucket))) + QPointF(2, 5);
          QList<QPointF> path{from, to};
          if (next == 0) {  // back up along the ring's return lane (from the last column, under the rows)
            const qreal lane = kRingX + kRingW - kSmallChip.width() / 2;
            const qreal lastLane = columnX(r, world) + lane;
            const qreal under = rowTop(rowsFor(world) - 1, world, rowH()) + rowH() + kRowGap / 2 - kSmallChip.height() / 2;
            path = lastLane == lane ? QList<QPointF>{from, QPointF(lane, from.y()), QPointF(lane, to.y()), to}
                                    : QList<QPointF>{from, QPointF(lastLane, from.y()), QPointF(lastLane, under), QPointF(lane, under),
                                                     QPointF(lane, to.y()), to};
          }
          addFlight(tr("b%1").arg(b.bucket), dpv::TensorRole::Grad, path, kSmallChip, order);
        }
        order += 2;  // the next bucket's wave when this one is half-way
      }
      // Finalize: every bucket's averaged values land in .grad on every rank.
      for (int r = 0; r < world && state_.kind == K::Finalize; ++r) {
        if (state_.ranks[r].grads != dpv::GradState::Averaged || !grads_.value(r)) continue;
        for (const DdpBucketView& b : state_.ranks[r].buckets)
          addFlight(tr("mean"), dpv::TensorRole::Grad, {at(buckets_.value(key(r, b.bucket))) + QPointF(2, 5), at(grads_.value(r))},
                    kSmallChip, order + b.bucket);
      }
      break;
    }
    case K::Step:
      // Every rank applies the same averaged gradient to its own weights.
      for (int r = 0; r < world; ++r)
        if (grads_.value(r) && params_.value(r))
          addFlight(tr("−lr·grad"), dpv::TensorRole::Grad, {at(grads_.value(r)), at(params_.value(r))}, kStateChip, 0);
      break;
    default: break;  // Forward and Loss: each rank computes on its own; nothing moves between ranks
  }
}

}  // namespace gui
