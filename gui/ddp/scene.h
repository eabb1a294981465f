#pragma once
// The DDP view of the Iteration page: one row per rank (its strided shard with padding duplicates
// marked, what it computes, its gradient buckets filling, waiting, all-reducing and done, and a
// few values of a parameter, its gradient and a buffer, green where they equal rank 0's), under a
// strip that contrasts DistributedSampler's strided shards with DataParallel's contiguous chunks.
// Driven only by DdpSceneStates built from the engine's recorded StageEvents.
#include <QGraphicsScene>
#include <QHash>

#include "gui/ddp/scene_model.h"

class QGraphicsRectItem;
class QGraphicsSimpleTextItem;

namespace gui {

class DdpScene : public QGraphicsScene {
  Q_OBJECT
 public:
  explicit DdpScene(QObject* parent = nullptr);
  void setTheme(const QString& theme);
  void setInfo(const IterationInfo& info);  // shows the state before the first stage
  void showState(const DdpSceneState& state);
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

  static QColor rankColor(int rank);

 private:
  static int key(int rank, int bucket) { return rank * 1000 + bucket; }
  void rebuild();
  void drawBatchStrips(qreal top);
  void drawRank(const DdpRankView& rank, qreal top);
  QGraphicsSimpleTextItem* text(const QString& s, qreal x, qreal y, const QColor& color, int px, bool bold = false);
  QGraphicsRectItem* box(const QRectF& r, const QColor& fill, const QColor& border, qreal radius = 0);

  QString theme_ = QStringLiteral("light");
  IterationInfo info_;
  DdpSceneState state_;
  QHash<int, QGraphicsRectItem*> buckets_;
  QHash<int, QList<QGraphicsRectItem*>> samples_;
  QHash<int, QGraphicsSimpleTextItem*> grads_, buffers_, activities_;
  QGraphicsSimpleTextItem* headline_ = nullptr;
};

}  // namespace gui
