// The sharded strategies' part of a rank's snapshot (engine/ddp/rank_snapshot.h).
#include "engine/ddp/rank_snapshot.h"

namespace dpv {

ShardState snapshot_shard(const DdpRank& rank) {
  ShardState s;
  s.stage = rank.zero_stage();
  if (s.stage == 1) s.owned_params = rank.partition().at(static_cast<size_t>(rank.rank()));
  if (s.stage < 2) return s;
  const FlatLayout& layout = rank.flat_layout();
  s.shard_begin = layout.shard_begin(rank.rank());
  s.shard_numel = layout.shard_numel();
  s.padding_in_shard = s.shard_numel - layout.shard_real_numel(rank.rank());
  s.full_params = rank.gathered_params().defined();
  s.full_grads = rank.flat_grads().defined();
  s.grad_shard_averaged = rank.flat_grad_shard().defined() && !s.full_grads;
  s.shard_head = rank.flat_param_shard().to_doubles(kRankHeadValues);
  if (s.grad_shard_averaged) s.grad_shard_head = rank.flat_grad_shard().to_doubles(kRankHeadValues);
  return s;
}

}  // namespace dpv
