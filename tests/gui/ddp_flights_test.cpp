// The DDP view animates like DataParallel's: at every stage of two iterations on four ranks the
// flights are the ones the engine's snapshots call for (the sampler's indices to the shards, rank
// 0's state and buffers to the others, fresh gradients into buckets, each launched bucket round
// the ring, the averaged gradients into .grad, the step), and when they end the picture is the
// engine's snapshot again. At 1x the chips in flight stay apart.
#include "ddp_test_support.h"

#include <QGraphicsPathItem>
#include <QLineF>

namespace gui {
namespace {

bool launched(const dpv::BucketState& b) { return b.launched || b.finished; }

// The same bucket (same parameters) in the event before, if any.
const dpv::BucketState* sameBucket(const dpv::StageEvent* before, int rank, const dpv::BucketState& b) {
  if (!before || rank >= static_cast<int>(before->ranks.size())) return nullptr;
  for (const auto& old : before->ranks[static_cast<size_t>(rank)].buckets)
    if (old.bucket == b.bucket && old.params == b.params) return &old;
  return nullptr;
}

// Buckets whose all-reduce went out in this stage (rank 0's account).
int launchesIn(const dpv::StageEvent* before, const dpv::StageEvent& ev) {
  int launches = 0;
  if (!ev.ranks.empty())
    for (const auto& b : ev.ranks[0].buckets) {
      const dpv::BucketState* old = sameBucket(before, 0, b);
      if (launched(b) && !(old && launched(*old))) ++launches;
    }
  return launches;
}

// How many chips the stage sends flying, from the engine's two snapshots alone.
int expectedFlights(const dpv::StageEvent* before, const dpv::StageEvent& ev) {
  using K = dpv::StageKind;
  const int W = static_cast<int>(ev.ranks.size());
  const bool buffers = !ev.ranks.empty() && !ev.ranks[0].buffer_head.empty();
  const int launches = launchesIn(before, ev);
  switch (ev.stage.kind) {
    case K::Construct: return (W - 1) * (1 + (buffers ? 1 : 0));
    case K::BroadcastBuffers: return buffers ? W - 1 : 0;
    case K::Sample: {
      int n = 0;
      for (const auto& r : ev.ranks) n += static_cast<int>(r.samples.size());
      return n;
    }
    case K::Backward: {
      int fills = 0;
      for (int r = 0; r < W; ++r)
        for (const auto& b : ev.ranks[static_cast<size_t>(r)].buckets) {
          const dpv::BucketState* old = sameBucket(before, r, b);
          if (b.ready > (old ? old->ready : 0)) ++fills;
        }
      return fills + W * launches;
    }
    case K::Finalize: {
      int landings = 0;
      for (const auto& r : ev.ranks)
        if (r.grads == dpv::GradState::Averaged) landings += static_cast<int>(r.buckets.size());
      return W * launches + landings;
    }
    case K::Step: return W;
    default: return 0;
  }
}

class DdpFlightsTest : public IterationPageTest {
 protected:
  // Steps until the page shows a stage of `kind` in iteration `iteration` (without animation).
  bool stepUntil(int iteration, dpv::StageKind kind) {
    page_->setSpeed(0);
    for (int guard = 0; guard < 100; ++guard) {
      const auto& plan = engine_->info().plan;
      const int ahead = page_->cursor() + 1;
      if (engine_->info().iteration == iteration && ahead < static_cast<int>(plan.size()) &&
          plan[static_cast<size_t>(ahead)].kind == kind)
        return true;
      const int next = page_->atEnd() ? 0 : ahead;
      const int want = page_->atEnd() ? engine_->info().iteration + 1 : engine_->info().iteration;
      page_->stepForward();
      if (!waitUntil([&] {
            return !page_->waitingForEngine() && page_->cursor() == next && engine_->info().iteration == want;
          }))
        return false;
      if (!page_->errorText().isEmpty()) return false;
    }
    return false;
  }
  // Animates the next stage at 1x and returns the smallest distance between two chips in flight
  // (those visible) over the whole animation, sampled every 20 ms; -1 when nothing flew.
  qreal closestDuringNextStage(int* flights) {
    page_->setSpeed(1.0);
    page_->stepForward();
    DdpScene* scene = page_->ddpScene();
    if (!waitUntil([&] { return scene->animating() || !page_->errorText().isEmpty(); })) return -1;
    *flights = static_cast<int>(scene->flyingChips().size());
    qreal best = 1e9;
    for (int ms = 0; ms <= scene->totalAnimationMs(); ms += 20) {
      scene->pauseAnimationsAt(ms);
      QList<QPointF> visible;
      for (ChipItem* chip : scene->flyingChips())
        if (chip->opacity() > 0.3) visible.append(chip->sceneBoundingRect().center());
      for (int i = 0; i < visible.size(); ++i)
        for (int j = i + 1; j < visible.size(); ++j) best = std::min(best, QLineF(visible[i], visible[j]).length());
    }
    scene->finishAnimations();
    return best;
  }
};

TEST_F(DdpFlightsTest, EveryStageFliesWhatTheEngineDidAndEndsInItsSnapshot) {
  start(ddpSettings(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 10));
  page_->setSpeed(4.0);  // short flights; the same code as at 1x
  DdpScene* scene = page_->ddpScene();
  const dpv::StageEvent* before = nullptr;
  dpv::StageEvent previous;
  bool sawRing = false, sawLanding = false;
  for (int iteration = 1; iteration <= 2; ++iteration) {
    for (int i = 0; i < static_cast<int>(engine_->info().plan.size()); ++i) {
      page_->stepForward();
      ASSERT_TRUE(waitUntil([&] {
        return !page_->waitingForEngine() && page_->cursor() == i && engine_->info().iteration == iteration;
      })) << "iteration " << iteration << " stage " << i;
      ASSERT_TRUE(page_->errorText().isEmpty()) << page_->errorText().toStdString();
      const dpv::StageEvent& ev = engine_->events().at(static_cast<size_t>(i));
      SCOPED_TRACE(ev.stage.title);
      // A new iteration's first stage changes the picture of the last one's snapshot.
      const int want = expectedFlights(before, ev);
      EXPECT_EQ(static_cast<int>(scene->flyingChips().size()), want);
      EXPECT_EQ(scene->animating(), want > 0);
      if (ev.stage.kind == dpv::StageKind::Finalize && want > 0) sawLanding = true;
      bool allReducing = false;
      for (const auto& r : ev.ranks)
        for (const auto& b : r.buckets) allReducing = allReducing || (b.launched && !b.finished);
      ASSERT_NE(scene->ringItem(), nullptr);
      EXPECT_EQ(describe(scene->ringItem()).toStdString(), allReducing ? "ring: all-reducing" : "ring: idle");
      // Whether a launched all-reduce is still running when the stage's snapshot is taken depends
      // on the communication thread's timing; that a bucket launched during the backward goes
      // round the ring does not.
      if (ev.stage.kind == dpv::StageKind::Backward && want > 0 && launchesIn(before, ev) > 0) sawRing = true;
      // The flights end in the engine's picture: nothing left flying, every shard cell shown.
      ASSERT_TRUE(waitUntil([&] { return !scene->animating(); }, 10000));
      EXPECT_TRUE(scene->flyingChips().isEmpty());
      checkStage(page_.get(), ev);
      for (int r = 0; r < 4; ++r)
        for (QGraphicsRectItem* cell : scene->sampleItems(r)) EXPECT_DOUBLE_EQ(cell->opacity(), 1.0);
      previous = ev;
      before = &previous;
    }
  }
  EXPECT_TRUE(sawRing) << "a bucket launched during the backward went round the ring";
  EXPECT_TRUE(sawLanding);
}

TEST_F(DdpFlightsTest, ShardsBucketsAndAveragedGradientsStayApartAt1x) {
  start(ddpSettings(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 10));
  int flights = 0;
  ASSERT_TRUE(stepUntil(1, dpv::StageKind::Sample));
  qreal closest = closestDuringNextStage(&flights);
  EXPECT_EQ(flights, 12) << "10 samples padded to 12 on 4 ranks";
  EXPECT_GT(closest, 20.0) << "sampler chips overlap";

  ASSERT_TRUE(stepUntil(1, dpv::StageKind::Finalize));
  closest = closestDuringNextStage(&flights);
  EXPECT_GE(flights, 4);
  EXPECT_GT(closest, 20.0) << "averaged gradients overlap";

  ASSERT_TRUE(stepUntil(1, dpv::StageKind::Step));
  closest = closestDuringNextStage(&flights);
  EXPECT_EQ(flights, 4);
  EXPECT_GT(closest, 20.0);

  // Iteration 2: the rebuilt buckets; the stage that launches the first one sends it round the ring.
  for (int guard = 0; guard < 40; ++guard) {
    ASSERT_TRUE(stepUntil(2, dpv::StageKind::Backward));
    const int next = page_->cursor() + 1;
    closest = closestDuringNextStage(&flights);
    const dpv::StageEvent& ev = engine_->events().at(static_cast<size_t>(next));
    if (std::any_of(ev.ranks[0].buckets.begin(), ev.ranks[0].buckets.end(), [](const auto& b) { return b.launched; })) break;
  }
  EXPECT_GE(flights, 4) << "a bucket's ring wave: one chip per rank";
  EXPECT_GT(closest, 20.0) << "ring chips overlap";
}

}  // namespace
}  // namespace gui
