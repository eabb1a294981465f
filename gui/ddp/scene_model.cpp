#include "gui/ddp/scene_model.h"

#include <QObject>
#include <algorithm>

#include "gui/common/scene_model.h"

namespace gui {

QString bucketPhaseName(BucketPhase phase) {
  switch (phase) {
    case BucketPhase::Empty: return QStringLiteral("empty");
    case BucketPhase::Filling: return QStringLiteral("filling");
    case BucketPhase::Waiting: return QStringLiteral("waiting");
    case BucketPhase::AllReducing: return QStringLiteral("all-reducing");
    case BucketPhase::Done: return QStringLiteral("done");
  }
  return QString();
}

BucketPhase bucketPhaseOf(const dpv::BucketState& b) {
  if (b.finished) return BucketPhase::Done;
  if (b.launched) return BucketPhase::AllReducing;
  if (b.ready >= static_cast<int>(b.params.size()) && !b.params.empty()) return BucketPhase::Waiting;
  if (b.ready > 0) return BucketPhase::Filling;
  return BucketPhase::Empty;
}

QString formatHead(const std::vector<double>& values) {
  QStringList parts;
  for (size_t i = 0; i < std::min<size_t>(values.size(), kHeadShown); ++i) {
    const double v = values[i];
    parts << QString::number(v, 'f', 3).replace(QLatin1Char('-'), QChar(0x2212));
  }
  return parts.join(QStringLiteral("  "));
}

namespace {

QString headline(const dpv::StageEvent& e, const QStringList& layerNames) {
  const int layer = e.stage.layer;
  const QString layerName = layer >= 0 && layer < layerNames.size() ? layerNames.at(layer) : QString();
  switch (e.stage.kind) {
    case dpv::StageKind::Construct:
      return QObject::tr("DDP(model): shapes checked across ranks, rank 0's parameters and buffers broadcast (once)");
    case dpv::StageKind::Sample:
      return QObject::tr("DistributedSampler: rank r takes samples r, r+W, r+2W, … (not contiguous chunks)");
    case dpv::StageKind::BroadcastBuffers:
      return QObject::tr("forward starts: rank 0's buffers overwrite every other rank's");
    case dpv::StageKind::Forward:
      return QObject::tr("forward, layer %1 %2, on every rank's own shard").arg(layer).arg(layerName);
    case dpv::StageKind::Loss: return QObject::tr("each rank's own loss (not averaged across ranks)");
    case dpv::StageKind::Backward:
      return QObject::tr("backward, layer %1 %2: ready gradients go into buckets; full buckets all-reduce in order")
          .arg(layer)
          .arg(layerName);
    case dpv::StageKind::Finalize:
      return QObject::tr("wait for every bucket's all-reduce: each rank's .grad is the MEAN over ranks");
    case dpv::StageKind::Step: return QObject::tr("optimizer.step() on every rank: same gradients, same new weights");
    default: return QString::fromStdString(e.stage.title);
  }
}

QString activity(const dpv::StageEvent& e, const dpv::RankState* r, const QStringList& layerNames) {
  const int layer = e.stage.layer;
  const QString layerName = layer >= 0 && layer < layerNames.size() ? layerNames.at(layer) : QString();
  switch (e.stage.kind) {
    case dpv::StageKind::Construct: return QObject::tr("receives rank 0's state");
    case dpv::StageKind::Sample: return QObject::tr("takes its shard");
    case dpv::StageKind::BroadcastBuffers:
      return r && r->rank == 0 ? QObject::tr("sends its buffers") : QObject::tr("gets rank 0's buffers");
    case dpv::StageKind::Forward: return QObject::tr("forward %1 %2").arg(layer).arg(layerName);
    case dpv::StageKind::Loss:
      return r && r->loss ? QObject::tr("loss %1").arg(*r->loss, 0, 'f', 4) : QObject::tr("loss");
    case dpv::StageKind::Backward: return QObject::tr("backward %1 %2").arg(layer).arg(layerName);
    case dpv::StageKind::Finalize: return QObject::tr("waits for all-reduces");
    case dpv::StageKind::Step: return QObject::tr("SGD step");
    default: return QString();
  }
}

}  // namespace

DdpSceneState ddpSceneStateFor(const IterationInfo& info, const dpv::StageEvent* event) {
  DdpSceneState state;
  state.strategy = info.strategy;
  const bool sharded = shardedStrategy(info.strategy);
  if (!info.zeroPartition.empty())
    for (const auto& name : info.parameterNames) state.params << programParameterName(info, name);
  state.started = event != nullptr;
  state.batchRows = info.batchRows;
  for (int64_t c : info.chunks) state.dpChunks << c;
  if (event) {
    state.stageIndex = event->index;
    state.kind = event->stage.kind;
    state.layer = event->stage.layer;
    // The sharded strategies' stages tell their own story: the engine's title, written from the run.
    const bool ownStory = sharded && event->stage.kind != dpv::StageKind::Sample && event->stage.kind != dpv::StageKind::Forward &&
                          event->stage.kind != dpv::StageKind::Loss && event->stage.kind != dpv::StageKind::BroadcastBuffers;
    state.headline = ownStory ? QString::fromStdString(event->stage.title) : headline(*event, info.layerNames);
    // Sample is the first stage after construction; every later stage knows the shards.
    state.sampled = event->stage.kind != dpv::StageKind::Construct;
  } else {
    state.headline = QObject::tr("%1 ranks, one process each; press Step to begin").arg(info.deviceLabels.size());
  }
  const dpv::RankState* rank0 = event && !event->ranks.empty() ? &event->ranks.front() : nullptr;
  for (int r = 0; r < static_cast<int>(info.deviceLabels.size()); ++r) {
    DdpRankView view;
    view.rank = r;
    view.title = QObject::tr("rank %1").arg(r);
    view.subtitle = info.deviceLabels.at(r);
    view.deviceName = r < static_cast<int>(info.deviceTitles.size()) ? info.deviceTitles[static_cast<size_t>(r)].name : view.subtitle;
    const dpv::RankState* rs = nullptr;
    if (event)
      for (const auto& s : event->ranks)
        if (s.rank == r) rs = &s;
    if (state.sampled && rs) {
      for (size_t k = 0; k < rs->samples.size(); ++k)
        view.samples.append(DdpSampleView{rs->samples[k], k < rs->padding.size() && rs->padding[k]});
    }
    if (event) {
      view.computing = event->stage.kind == dpv::StageKind::Forward || event->stage.kind == dpv::StageKind::Backward ||
                       event->stage.kind == dpv::StageKind::Loss || event->stage.kind == dpv::StageKind::Step;
      view.activity = activity(*event, rs, info.layerNames);
    } else {
      view.activity = QObject::tr("not started");
      // A plan without Construct belongs to an iteration after the first: DDP was built then.
      view.constructed = std::none_of(info.plan.begin(), info.plan.end(),
                                      [](const dpv::Stage& s) { return s.kind == dpv::StageKind::Construct; });
    }
    if (rs) {
      view.constructed = rs->constructed;
      view.grads = rs->grads;
      view.loss = rs->loss;
      for (const auto& b : rs->buckets) {
        DdpBucketView bv;
        bv.bucket = b.bucket;
        for (const auto& p : b.params) bv.params << programParameterName(info, p);
        bv.bytes = static_cast<qint64>(b.bytes);
        bv.ready = b.ready;
        bv.total = static_cast<int>(b.params.size());
        bv.phase = bucketPhaseOf(b);
        bv.text = QObject::tr("b%1 · %2/%3 · %4").arg(b.bucket).arg(bv.ready).arg(bv.total).arg(formatBytes(static_cast<double>(bv.bytes)));
        view.buckets.append(bv);
      }
      const QString name = programParameterName(info, rs->watched_param);
      if (!rs->param_head.empty()) view.paramText = QStringLiteral("%1  %2").arg(name, formatHead(rs->param_head));
      switch (rs->grads) {
        case dpv::GradState::None: view.gradText = QObject::tr("grad: none yet"); break;
        case dpv::GradState::Local:
          view.gradText = rs->grad_head.empty() ? QObject::tr("grad (local): not yet for %1").arg(name)
                                                : QObject::tr("grad (local)  %1").arg(formatHead(rs->grad_head));
          break;
        case dpv::GradState::Averaged:
          view.gradText = QObject::tr("grad (averaged)  %1").arg(formatHead(rs->grad_head));
          break;
      }
      if (!rs->watched_buffer.empty() && !rs->buffer_head.empty())
        view.bufferText = QStringLiteral("%1  %2").arg(programParameterName(info, rs->watched_buffer), formatHead(rs->buffer_head));
      if (rank0) {
        view.paramsEqualRank0 = rs->param_head == rank0->param_head;
        view.gradsEqualRank0 = rs->grad_head == rank0->grad_head;
        view.buffersEqualRank0 = rs->buffer_head == rank0->buffer_head;
      }
    }
    if (sharded) {
      fillShardView(view, info, event, rs);
      const auto k = event ? event->stage.kind : dpv::StageKind::Construct;
      if (event && (k == dpv::StageKind::Step || k == dpv::StageKind::Finalize || k == dpv::StageKind::GatherParams ||
                    k == dpv::StageKind::FreeParams || k == dpv::StageKind::ReduceScatter || k == dpv::StageKind::BroadcastParams))
        view.activity = shardedActivity(*event, view);
      view.computing = view.computing || (event && k == dpv::StageKind::GatherParams);
    }
    state.ranks.append(view);
  }
  return state;
}

}  // namespace gui
