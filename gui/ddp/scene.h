#pragma once
// The DDP view of the Iteration page: one row per rank (its strided shard with padding duplicates
// marked, what it computes, its gradient buckets filling, waiting, all-reducing and done, and a
// few values of a parameter, its gradient and a buffer, green where they equal rank 0's), under a
// strip that contrasts DistributedSampler's strided shards with DataParallel's contiguous chunks.
// Driven only by DdpSceneStates built from the engine's recorded StageEvents. With animation on,
// chips fly over the new state's picture as DataParallel's do (gui/common/flight.h): the
// sampler's indices to each rank's shard, rank 0's state and buffers to the other ranks, fresh
// gradients into their buckets, each launched bucket round the ring (in bucket order), the
// averaged gradients into every rank's .grad, and the step from .grad into the weights. When the
// flights end, the picture is the state's alone.
#include <QGraphicsScene>
#include <QHash>
#include <QPointer>

#include "gui/ddp/inspect.h"
#include "gui/ddp/scene_model.h"
#include "gui/common/scene_items.h"

class QGraphicsItem;
class QGraphicsPathItem;
class QGraphicsRectItem;
class QGraphicsSimpleTextItem;
class QParallelAnimationGroup;

namespace gui {

class DdpScene : public QGraphicsScene {
  Q_OBJECT
 public:
  explicit DdpScene(QObject* parent = nullptr);
  ~DdpScene() override;
  void setTheme(const QString& theme);
  void setInfo(const IterationInfo& info);  // shows the state before the first stage
  // Shows a state; with `animate`, the stage's chips fly from where the stage takes them from.
  void showState(const DdpSceneState& state, bool animate = false);
  // Milliseconds one flight takes (0: no animation).
  void setDuration(int ms) { duration_ = ms; }
  int duration() const { return duration_; }
  void finishAnimations();  // jumps every running flight to its end
  bool animating() const;
  // For tests: pauses the flights at `ms`, and the chips flying (visible or waiting to set off).
  void pauseAnimationsAt(int ms);
  int totalAnimationMs() const;
  QList<ChipItem*> flyingChips() const { return ghosts_; }
  // The ring drawn beside the buckets (null before construction or with one rank); its
  // data(kDescription) is "ring: all-reducing" while a bucket's all-reduce is in flight, else "ring: idle".
  QGraphicsPathItem* ringItem() const { return ring_; }
  // The item a click on a part opens in the inspector (a shard's first cell, a bucket, the
  // .grad, parameter or buffer values of a rank); null when not drawn.
  QGraphicsItem* partItem(DdpPart part, int rank, int bucket = 0) const;
  const DdpSceneState& state() const { return state_; }
  const IterationInfo& info() const { return info_; }

  // What is drawn, for tests (null / empty when not drawn). Each item's data(kDescription) says
  // what it stands for ("bucket 0: all-reducing 2/2", "sample 6", "sample 0 (padding)").
  static constexpr int kDescription = 0;
  QGraphicsRectItem* bucketItem(int rank, int bucket) const { return buckets_.value(key(rank, bucket)); }
  QList<QGraphicsRectItem*> sampleItems(int rank) const { return samples_.value(rank); }
  QGraphicsSimpleTextItem* gradText(int rank) const { return grads_.value(rank); }
  QGraphicsSimpleTextItem* bufferText(int rank) const { return buffers_.value(rank); }
  QGraphicsSimpleTextItem* activityText(int rank) const { return activities_.value(rank); }
  QGraphicsSimpleTextItem* headlineText() const { return headline_; }
  // ZeRO-2/3: a rank's flat parameter and flat gradient bars, one rect per rank slice in slice
  // order ("slice 1: own", "slice 0: gathered", "slice 2: freed"; gradients "slice 1: averaged",
  // "slice 0: local", "slice 2: none"), and the padding's label ("padding (2)").
  QList<QGraphicsRectItem*> flatSliceItems(int rank) const { return flatSlices_.value(rank); }
  QList<QGraphicsRectItem*> gradSliceItems(int rank) const { return gradSlices_.value(rank); }
  QGraphicsSimpleTextItem* paddingText(int rank) const { return paddingTexts_.value(rank); }
  // ZeRO-1: a rank's chips of every parameter in model order ("0.weight: owned", "0.bias").
  QList<QGraphicsRectItem*> paramChipItems(int rank) const { return paramChips_.value(rank); }
  // A rank's memory bar (its data(kDescription): "memory 1.2 KB"); null without memory figures.
  QGraphicsRectItem* memoryItem(int rank) const { return memoryBars_.value(rank); }

  static QColor rankColor(int rank);

 signals:
  void animationFinished();
  // A click on a rank's shard, bucket, gradient, parameter or buffer values.
  void partClicked(gui::DdpPart part, int rank, int bucket);

 protected:
  void mousePressEvent(QGraphicsSceneMouseEvent* event) override;

 private:
  static int key(int rank, int bucket) { return rank * 1000 + bucket; }
  void rebuild();
  void drawBatchStrips(qreal top);
  void drawRank(const DdpRankView& rank, qreal top);
  void drawRing();
  // The sharded strategies' line under a rank's row (zero_scene.cpp): ZeRO-1's parameter chips,
  // or ZeRO-2/3's flat parameter and gradient bars, and the rank's memory bar.
  void drawShardLine(const DdpRankView& rank, qreal top);
  void drawFlatBar(const DdpRankView& rank, qreal x, qreal y, qreal w, bool grads);
  void drawParamChips(const DdpRankView& rank, qreal x, qreal y, qreal w);
  void drawMemoryBar(const DdpRankView& rank, qreal x, qreal y, qreal w);
  void drawMemoryLegend(qreal top);  // the memory bars' colours, one entry per kind
  void addShardFlights(const DdpSceneState& previous);
  qreal rowH() const;  // a rank row's height: taller with the sharded strategies' line
  // The flights from `previous` to the state shown (state_).
  void addFlights(const DdpSceneState& previous);
  void addSampleFlights();  // the sampler's indices dealt to the ranks' shards
  ChipItem* addFlight(const QString& text, dpv::TensorRole role, const QList<QPointF>& path, QSizeF size, int order);
  void revealOnArrival(QGraphicsItem* item, int order);  // hidden until its flight arrives
  void makeClickable(QGraphicsItem* item, DdpPart part, int rank, int bucket = 0);
  QGraphicsSimpleTextItem* text(const QString& s, qreal x, qreal y, const QColor& color, int px, bool bold = false);
  QGraphicsRectItem* box(const QRectF& r, const QColor& fill, const QColor& border, qreal radius = 0);

  QPointF origin_;  // added to what text() and box() place: the column of the rank being drawn
  QString theme_ = QStringLiteral("light");
  IterationInfo info_;
  DdpSceneState state_;
  QHash<int, QGraphicsRectItem*> buckets_;
  QHash<int, QList<QGraphicsRectItem*>> samples_;
  QHash<int, QGraphicsSimpleTextItem*> grads_, buffers_, activities_, params_;
  QList<QGraphicsRectItem*> stripCells_;  // the DistributedSampler strip, by position in the padded list
  QHash<int, QList<QGraphicsRectItem*>> flatSlices_, gradSlices_, paramChips_;
  QHash<int, QGraphicsSimpleTextItem*> paddingTexts_;
  QHash<int, QGraphicsRectItem*> memoryBars_;
  QGraphicsSimpleTextItem* headline_ = nullptr;
  QGraphicsPathItem* ring_ = nullptr;
  int duration_ = 700;
  QPointer<QParallelAnimationGroup> group_;
  QList<ChipItem*> ghosts_;
};

}  // namespace gui
