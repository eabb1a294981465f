#pragma once
// Checks shared by the DDP view tests: the DDP picture against one engine event (shards and their
// padding, every bucket's phase and fill, what .grad holds on each rank).
#include "gui_test_support.h"

#include <QGraphicsRectItem>
#include <QGraphicsSimpleTextItem>

#include "gui/ddp/scene.h"

namespace gui {

inline AppSettings ddpSettings(const QString& devices, const QString& preset, int batch) {
  AppSettings s = settingsFor(devices, preset, batch);
  s.strategy = dpv::StrategyKind::DistributedDataParallel;
  return s;
}

// The phase a bucket is in, from the engine's fields (written out here, not the view's helper).
inline QString expectedPhase(const dpv::BucketState& b) {
  if (b.finished) return QStringLiteral("done");
  if (b.launched) return QStringLiteral("all-reducing");
  if (b.ready == static_cast<int>(b.params.size())) return QStringLiteral("waiting");
  return b.ready > 0 ? QStringLiteral("filling") : QStringLiteral("empty");
}

inline QString describe(const QGraphicsItem* item) { return item ? item->data(DdpScene::kDescription).toString() : QString(); }

// Checks the DDP scene against one engine event; returns the number of ranks holding averaged gradients.
inline int checkStage(IterationPage* page, const dpv::StageEvent& ev) {
  DdpScene* scene = page->ddpScene();
  int averaged = 0;
  for (const dpv::RankState& rs : ev.ranks) {
    const int r = rs.rank;
    SCOPED_TRACE(QStringLiteral("stage %1 (%2), rank %3").arg(ev.index).arg(QString::fromStdString(ev.stage.title)).arg(r).toStdString());
    // Shard: one cell per sample in the engine's order, padding marked (from Sample on).
    const QList<QGraphicsRectItem*> cells = scene->sampleItems(r);
    if (ev.stage.kind == dpv::StageKind::Construct) {
      EXPECT_TRUE(cells.isEmpty());
    } else {
      EXPECT_EQ(cells.size(), static_cast<int>(rs.samples.size()));
      for (int k = 0; k < std::min<int>(cells.size(), static_cast<int>(rs.samples.size())); ++k) {
        const QString want = rs.padding[static_cast<size_t>(k)] ? QStringLiteral("sample %1 (padding)").arg(rs.samples[static_cast<size_t>(k)])
                                                                 : QStringLiteral("sample %1").arg(rs.samples[static_cast<size_t>(k)]);
        EXPECT_EQ(describe(cells[k]).toStdString(), want.toStdString());
      }
    }
    // Buckets: every one drawn, with the engine's phase and fill.
    for (const dpv::BucketState& b : rs.buckets) {
      const QString want =
          QStringLiteral("bucket %1: %2 %3/%4").arg(b.bucket).arg(expectedPhase(b)).arg(b.ready).arg(b.params.size());
      EXPECT_EQ(describe(scene->bucketItem(r, b.bucket)).toStdString(), want.toStdString());
    }
    EXPECT_EQ(scene->bucketItem(r, static_cast<int>(rs.buckets.size())), nullptr);
    // What .grad holds.
    EXPECT_EQ(describe(scene->gradText(r)).toStdString(), std::string(dpv::grad_state_name(rs.grads)));
    if (rs.grads == dpv::GradState::Averaged) ++averaged;
  }
  return averaged;
}

}  // namespace gui
