// The tensor inspector works on the DDP view: a click on a rank's shard lists its samples (index,
// padding repeat, the input row's values), a click on a bucket shows that bucket on every rank
// (phase and values: ×1/W gradients while filling, the same mean on every rank once done), a click
// on .grad shows every rank's local gradient before averaging and the averaged one after — all
// equal to the engine's recorded snapshots.
#include "ddp_test_support.h"

#include <QTreeWidget>

#include "gui/iteration/tensor_inspector.h"

namespace gui {
namespace {

// The inspector's values column for a row of `values` (its first six, "…" when there are more).
std::string valuesCell(const std::vector<double>& values) {
  QStringList parts;
  for (size_t i = 0; i < values.size() && i < 6; ++i) parts << QString::number(values[i], 'g', 4);
  if (values.size() > 6) parts << QStringLiteral("…");
  return (QStringLiteral("[") + parts.join(QStringLiteral(", ")) + QStringLiteral("]")).toStdString();
}

class DdpInspectorTest : public IterationPageTest {
 protected:
  // Clicks the middle of a part of the DDP picture through the view, as a learner would.
  void click(DdpPart part, int rank, int bucket = 0) {
    QGraphicsItem* item = page_->ddpScene()->partItem(part, rank, bucket);
    ASSERT_NE(item, nullptr);
    QGraphicsView* view = nullptr;
    for (QGraphicsView* v : page_->findChildren<QGraphicsView*>())
      if (v->scene() == page_->ddpScene()) view = v;
    ASSERT_NE(view, nullptr);
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, view->mapFromScene(item->sceneBoundingRect().center()));
  }
  int selectedRow() const {
    QTreeWidget* tree = page_->inspector()->tree();
    return tree->currentItem() ? tree->indexOfTopLevelItem(tree->currentItem()) : -1;
  }
  int indexOf(int iteration, dpv::StageKind kind, int nth = 0) {
    if (engine_->info().iteration != iteration) return -1;
    int seen = 0;
    for (int i = 0; i < static_cast<int>(engine_->info().plan.size()); ++i)
      if (engine_->info().plan[static_cast<size_t>(i)].kind == kind && seen++ == nth) return i;
    return -1;
  }
  bool stepToStage(int index) {
    for (int i = page_->cursor() + 1; i <= index; ++i)
      if (!stepTo(i)) return false;
    return page_->cursor() == index;
  }
};

TEST_F(DdpInspectorTest, ShardBucketAndGradientRowsAreTheEnginesSnapshot) {
  start(ddpSettings(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 10));
  TensorInspector* inspector = page_->inspector();

  // Sample: rank 2's shard is samples 2, 6 and 0 again (padding), with their input rows.
  ASSERT_TRUE(stepToStage(indexOf(1, dpv::StageKind::Sample)));
  click(DdpPart::Shard, 2);
  {
    const dpv::RankState& r = engine_->events().at(page_->cursor()).ranks.at(2);
    ASSERT_EQ(inspector->rowCount(), static_cast<int>(r.samples.size()));
    ASSERT_EQ(r.sample_rows.size(), r.samples.size());
    for (int k = 0; k < inspector->rowCount(); ++k) {
      const auto kk = static_cast<size_t>(k);
      const QString name = r.padding[kk] ? QStringLiteral("sample %1 (padding)").arg(r.samples[kk]) : QStringLiteral("sample %1").arg(r.samples[kk]);
      EXPECT_EQ(inspector->rowText(k, 0).toStdString(), name.toStdString());
      EXPECT_EQ(inspector->rowText(k, 3).toStdString(), valuesCell(r.sample_rows[kk]));
    }
    EXPECT_TRUE(r.padding.back()) << "10 samples on 4 ranks: rank 2 ends with a repeat";
    EXPECT_TRUE(inspector->rowText(inspector->rowCount() - 1, 0).endsWith(QLatin1String("(padding)")));
    EXPECT_TRUE(inspector->headline().contains(QLatin1String("rank 2")));
  }

  // Iteration 1's first Backward stage: the one bucket is filling (no values yet: its buffer is
  // partly uninitialised until every gradient is in).
  ASSERT_TRUE(stepToStage(indexOf(1, dpv::StageKind::Backward)));
  click(DdpPart::Bucket, 1, 0);
  {
    const dpv::StageEvent& ev = engine_->events().at(page_->cursor());
    ASSERT_EQ(inspector->rowCount(), 4);
    EXPECT_EQ(selectedRow(), 1) << "the clicked rank's row";
    for (int q = 0; q < 4; ++q) {
      const dpv::BucketState& b = ev.ranks.at(static_cast<size_t>(q)).buckets.at(0);
      EXPECT_EQ(inspector->rowText(q, 0).toStdString(),
                QStringLiteral("rank %1: bucket 0 (%2)").arg(q).arg(expectedPhase(b)).toStdString());
      ASSERT_TRUE(b.values.empty());
      EXPECT_EQ(inspector->rowText(q, 3).toStdString(), "[…]") << "no values listed, the bucket's size kept";
    }
  }

  // Finalize: the bucket holds the same mean on every rank; .grad shows local then averaged rows.
  ASSERT_TRUE(stepToStage(indexOf(1, dpv::StageKind::Finalize)));
  click(DdpPart::Bucket, 3, 0);
  ASSERT_EQ(inspector->rowCount(), 4);
  {
    const dpv::BucketState& b = engine_->events().at(page_->cursor()).ranks.at(3).buckets.at(0);
    ASSERT_FALSE(b.values.empty());
    EXPECT_EQ(inspector->rowText(3, 3).toStdString(), valuesCell(b.values));
    EXPECT_EQ(inspector->rowText(3, 0).toStdString(), "rank 3: bucket 0 (done)");
  }
  for (int q = 0; q < 3; ++q) EXPECT_EQ(inspector->rowText(q, 3).toStdString(), inspector->rowText(3, 3).toStdString());
  click(DdpPart::Grad, 3);
  {
    const dpv::StageEvent& fin = engine_->events().at(page_->cursor());
    // The last Backward stage's snapshot: the ranks' local gradients.
    const dpv::StageEvent* local = nullptr;
    for (int i = page_->cursor(); i >= 0 && !local; --i)
      if (engine_->events().at(i).stage.kind == dpv::StageKind::Backward) local = &engine_->events().at(i);
    ASSERT_NE(local, nullptr);
    ASSERT_EQ(inspector->rowCount(), 8);
    EXPECT_EQ(selectedRow(), 4 + 3) << "rank 3's averaged gradient";
    for (int q = 0; q < 4; ++q) {
      EXPECT_TRUE(inspector->rowText(q, 0).endsWith(QLatin1String("local")));
      EXPECT_EQ(inspector->rowText(q, 3).toStdString(), valuesCell(local->ranks.at(static_cast<size_t>(q)).grad_head));
      EXPECT_TRUE(inspector->rowText(4 + q, 0).endsWith(QLatin1String("averaged")));
      EXPECT_EQ(inspector->rowText(4 + q, 3).toStdString(), valuesCell(fin.ranks.at(static_cast<size_t>(q)).grad_head));
    }
    EXPECT_NE(inspector->rowText(0, 3).toStdString(), inspector->rowText(1, 3).toStdString());
    EXPECT_EQ(inspector->rowText(4, 3).toStdString(), inspector->rowText(5, 3).toStdString());
  }

  // Parameters and buffers: one row per rank with that rank's values.
  click(DdpPart::Buffers, 1);
  {
    const dpv::StageEvent& ev = engine_->events().at(page_->cursor());
    ASSERT_EQ(inspector->rowCount(), 4);
    for (int q = 0; q < 4; ++q)
      EXPECT_EQ(inspector->rowText(q, 3).toStdString(), valuesCell(ev.ranks.at(static_cast<size_t>(q)).buffer_head));
  }
  // A new stage clears the inspector.
  ASSERT_TRUE(stepTo(page_->cursor() + 1));
  EXPECT_EQ(inspector->rowCount(), 0);
}

}  // namespace
}  // namespace gui
