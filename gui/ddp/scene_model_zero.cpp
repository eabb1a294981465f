// The sharded strategies' part of the DDP view's state (scene_model.h): ZeRO-1's owned parameters
// and ZeRO-2/3's flat parameter on each rank, from the run's partition or flat layout
// (IterationInfo, the engine's own functions) and the rank's ShardState after the stage.
#include <QObject>

#include "gui/common/scene_model.h"
#include "gui/ddp/scene_model.h"

namespace gui {

bool shardedStrategy(dpv::StrategyKind kind) { return dpv::zero_stage(kind) > 0; }

void fillShardView(DdpRankView& view, const IterationInfo& info, const dpv::StageEvent* event, const dpv::RankState* rs) {
  const int r = view.rank;
  if (event && r < static_cast<int>(event->devices.size())) view.memory = event->devices[static_cast<size_t>(r)].memory;
  else if (!event && r < static_cast<int>(info.devicesBefore.size())) view.memory = info.devicesBefore[static_cast<size_t>(r)].memory;
  if (view.memory && view.memory->total() == 0) view.memory.reset();
  if (rs && rs->shard.stage == 1) {
    for (const auto& name : rs->shard.owned_params) view.ownedParams << programParameterName(info, name);
  } else if (!rs && r < static_cast<int>(info.zeroPartition.size())) {
    // Before the first stage: the partition the ranks will use (the same function the engine's ranks call).
    for (const auto& name : info.zeroPartition[static_cast<size_t>(r)]) view.ownedParams << programParameterName(info, name);
  }
  if (!info.flatLayout) return;
  const dpv::FlatLayout& layout = *info.flatLayout;
  FlatParamView flat;
  for (const auto& e : layout.entries) flat.entries.append({programParameterName(info, e.name), e.offset, e.numel});
  flat.paddedNumel = layout.padded_numel;
  flat.padding = layout.padding();
  flat.world = layout.world;
  flat.shardBegin = layout.shard_begin(r);
  flat.shardNumel = layout.shard_numel();
  if (rs && rs->shard.stage >= 2) {
    const dpv::ShardState& s = rs->shard;
    flat.shardBegin = s.shard_begin;
    flat.shardNumel = s.shard_numel;
    flat.fullParams = s.full_params;
    flat.fullGrads = s.full_grads;
    flat.gradShardAveraged = s.grad_shard_averaged;
    flat.shardHead = formatHead(s.shard_head);
    flat.gradHead = formatHead(s.grad_shard_head);
  }
  view.flat = flat;
  // FSDP keeps the gradient in the flat parameter's slice, not in each parameter's .grad.
  if (view.grads == dpv::GradState::None && (flat.fullGrads || flat.gradShardAveraged))
    view.gradText = QObject::tr("grad: in the flat gradient (below)");
}

QString shardedActivity(const dpv::StageEvent& e, const DdpRankView& view) {
  switch (e.stage.kind) {
    case dpv::StageKind::GatherParams: return QObject::tr("all-gathers the slices");
    case dpv::StageKind::FreeParams: return QObject::tr("frees all but its slice");
    case dpv::StageKind::ReduceScatter: return QObject::tr("reduce-scatters grads");
    case dpv::StageKind::BroadcastParams:
      return view.ownedParams.size() == 1 ? QObject::tr("sends its 1 parameter")
                                          : QObject::tr("sends its %1 parameters").arg(view.ownedParams.size());
    case dpv::StageKind::Step:
      if (view.flat) return QObject::tr("steps its slice only");
      return view.ownedParams.size() == 1 ? QObject::tr("steps its 1 parameter")
                                          : QObject::tr("steps its %1 parameters").arg(view.ownedParams.size());
    case dpv::StageKind::Finalize: return QObject::tr("waits for all-reduces");
    default: return QString::fromStdString(e.stage.title);
  }
}

}  // namespace gui
