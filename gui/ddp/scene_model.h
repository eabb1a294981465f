#pragma once
// What the DDP view shows after a stage, derived from the engine's DDP snapshot alone
// (StageEvent::ranks): a pure function, so tests can compare the picture with the engine stage by
// stage. Rows are ranks; each shows its strided shard, what it computes, its buckets and a few
// values of one parameter, its gradient and one buffer.
#include <QList>
#include <QString>
#include <QStringList>
#include <optional>

#include "gui/runtime/engine_types.h"

namespace gui {

// Where a bucket stands on one rank.
enum class BucketPhase {
  Empty,        // no gradient of this backward yet
  Filling,      // some of its gradients are in (copied in times 1/world)
  Waiting,      // full, but an earlier bucket has not launched yet (buckets go out in order)
  AllReducing,  // its all-reduce was launched on the communication thread
  Done          // its all-reduce has finished
};
QString bucketPhaseName(BucketPhase phase);  // "empty", "filling", "waiting", "all-reducing", "done"

struct DdpBucketView {
  int bucket = 0;
  QStringList params;
  qint64 bytes = 0;
  int ready = 0;
  int total = 0;
  BucketPhase phase = BucketPhase::Empty;
  QString text;  // "b0 · 2/2 · 96 B"
};

struct DdpSampleView {
  qint64 index = 0;      // row of the global batch
  bool padding = false;  // a repeat DistributedSampler added
};

// ZeRO-2/3: one rank's flat parameter (FSDP's FlatParameter), from the run's flat layout and the
// rank's ShardState after the stage.
struct FlatEntryView {
  QString name;  // the program's name for the parameter ("fc.weight")
  qint64 offset = 0;
  qint64 numel = 0;
};
struct FlatParamView {
  QList<FlatEntryView> entries;  // model order, back to back from 0
  qint64 paddedNumel = 0;        // L, a multiple of the world size
  qint64 padding = 0;            // zeros at the end (L - the parameters' elements)
  int world = 1;
  qint64 shardBegin = 0;         // this rank's slice [shardBegin, shardBegin + shardNumel)
  qint64 shardNumel = 0;
  bool fullParams = false;       // every rank's slice is gathered here now
  bool fullGrads = false;        // the whole flat gradient (this rank's own, before the reduce-scatter)
  bool gradShardAveraged = false;  // the reduce-scatter left the averaged gradient of this slice
  QString shardHead;             // the slice's first values
  QString gradHead;              // its averaged gradient's first values
};

struct DdpRankView {
  int rank = 0;
  QString title;       // "rank 1"
  QString subtitle;    // "GPU 1 (simulated on CPU)"
  QString deviceName;  // "GPU 1", what the rank's row shows
  QList<DdpSampleView> samples;  // empty until the Sample stage
  bool computing = false;        // this stage ran compute on the rank
  QString activity;              // "forward: layer 2 BatchNorm1d", "loss 0.6931", "waits"
  bool constructed = false;
  QList<DdpBucketView> buckets;
  dpv::GradState grads = dpv::GradState::None;
  QString paramText;   // "3.weight  0.123  −0.311  0.052  0.480"
  QString gradText;    // "grad (local)  …" / "grad (averaged)  …" / "no gradient yet"
  QString bufferText;  // "1.running_mean  …" ("" without buffers)
  bool paramsEqualRank0 = true;
  bool gradsEqualRank0 = true;
  bool buffersEqualRank0 = true;
  std::optional<double> loss;
  QString failure;  // why this rank's stage failed ("" when it did not): the row is marked red
  // The sharded strategies (from the event's RankState::shard and DeviceState::memory).
  QStringList ownedParams;      // ZeRO-1: the parameters whose optimizer state and step are this rank's
  std::optional<FlatParamView> flat;  // ZeRO-2/3
  std::optional<dpv::MemoryBreakdown> memory;  // what the rank's device holds after the stage
};

struct DdpSceneState {
  bool started = false;
  int stageIndex = -1;
  dpv::StageKind kind = dpv::StageKind::Construct;
  int layer = -1;
  QString headline;            // one line: what every rank does in this stage
  qint64 batchRows = 0;
  QList<qint64> dpChunks;      // DataParallel's contiguous chunk sizes of the same batch
  bool sampled = false;        // the shards are known (from the Sample stage on)
  dpv::StrategyKind strategy = dpv::StrategyKind::DistributedDataParallel;
  QStringList params;          // ZeRO-1: every parameter in model order (the owned ones marked per rank)
  qint64 memoryScale = 1;      // the largest rank memory of the run so far: the bars' common scale
  QList<DdpRankView> ranks;
};

DdpSceneState ddpSceneStateFor(const IterationInfo& info, const dpv::StageEvent* event);
// The sharded strategies (scene_model_zero.cpp). ZeRO-1, -2, -3 (not DataParallel nor DDP).
bool shardedStrategy(dpv::StrategyKind kind);
// Fills a rank's ownedParams, flat and memory from the run and the rank's state after the stage.
void fillShardView(DdpRankView& view, const IterationInfo& info, const dpv::StageEvent* event, const dpv::RankState* rs);
// What a rank does in a stage under a sharded strategy ("all-gathers the slices", ...).
QString shardedActivity(const dpv::StageEvent& e, const DdpRankView& view);
BucketPhase bucketPhaseOf(const dpv::BucketState& bucket);
// "0.123  −0.311  0.052": the first kHeadShown values of a snapshot head.
constexpr size_t kHeadShown = 3;
QString formatHead(const std::vector<double>& values);

}  // namespace gui
