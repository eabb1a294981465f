// One DDP rank's snapshot for the app (see rank_snapshot.h).
#include "engine/ddp/rank_snapshot.h"

namespace dpv {

std::string watched_parameter(const Model& model) {
  const auto decls = model.parameter_decls();
  for (auto it = decls.rbegin(); it != decls.rend(); ++it) {
    const std::string& n = it->name;
    if (n.size() >= 7 && n.compare(n.size() - 7, 7, ".weight") == 0) return n;
  }
  return decls.empty() ? std::string() : decls.back().name;
}

RankState snapshot_rank(const DdpRank* rank, int rank_index, const Model& model, const RankSnapshotContext& context) {
  RankState s;
  s.rank = rank_index;
  s.samples = context.samples;
  s.padding = context.padding;
  s.watched_param = watched_parameter(model);
  const auto buffers = model.buffer_decls();
  if (!buffers.empty()) s.watched_buffer = buffers.front().name;
  if (!rank) return s;  // before Construct: nothing on the device yet

  s.constructed = true;
  const Reducer& reducer = rank->reducer();
  s.buckets_rebuilt = reducer.rebuilt();
  const auto names = reducer.bucket_names();
  const auto decls = model.parameter_decls();
  // The bucket progress belongs to this iteration's backward only; before it (after a rebuild) the
  // buckets are the new, empty ones.
  const std::vector<int> ready = context.backward_started ? reducer.ready_counts() : std::vector<int>{};
  const bool progress = ready.size() == names.size();
  for (size_t b = 0; b < names.size(); ++b) {
    BucketState bucket;
    bucket.bucket = static_cast<int>(b);
    bucket.params = names[b];
    for (const auto& n : names[b])
      for (const auto& d : decls)
        if (d.name == n) bucket.bytes += static_cast<size_t>(shape_numel(d.shape)) * dtype_size(d.dtype);
    if (progress) {
      bucket.ready = ready[b];
      bucket.launched = static_cast<int>(b) < reducer.launched_count();
      bucket.finished = bucket.launched && (context.finalized || reducer.all_reduce_finished(static_cast<int>(b)));
    }
    s.buckets.push_back(std::move(bucket));
  }

  if (context.finalized) {
    s.grads = GradState::Averaged;
  } else if (context.backward_started && !rank->grads().empty()) {
    s.grads = GradState::Local;
  }
  if (const Tensor* p = rank->params().find(s.watched_param)) s.param_head = p->to_doubles(kRankHeadValues);
  if (s.grads != GradState::None)
    if (const Tensor* g = rank->grads().find(s.watched_param)) s.grad_head = g->to_doubles(kRankHeadValues);
  if (!s.watched_buffer.empty())
    if (const Tensor* b = rank->buffers().find(s.watched_buffer)) s.buffer_head = b->to_doubles(kRankHeadValues);
  if (context.loss_computed) s.loss = rank->loss();
  return s;
}

}  // namespace dpv
