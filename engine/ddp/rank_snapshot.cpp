// One DDP rank's snapshot for the app (see rank_snapshot.h).
#include "engine/ddp/rank_snapshot.h"

#include "engine/memory_listing.h"

namespace dpv {

std::string watched_parameter(const Model& model) {
  const auto decls = model.parameter_decls();
  for (auto it = decls.rbegin(); it != decls.rend(); ++it) {
    const std::string& n = it->name;
    if (n.size() >= 7 && n.compare(n.size() - 7, 7, ".weight") == 0) return n;
  }
  return decls.empty() ? std::string() : decls.back().name;
}

namespace {
void add_buckets(const DdpRank& rank, const Model& model, const RankSnapshotContext& context, RankState& s);
}  // namespace

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
  // The shard's rows, once this iteration's batch is on the rank (the same rows, in sampler order).
  const Tensor& input = rank->input();
  if (input.defined() && input.ndim() >= 1 && input.dim(0) == static_cast<int64_t>(context.samples.size()))
    for (int64_t k = 0; k < input.dim(0); ++k) s.sample_rows.push_back(input.slice0(k, k + 1).to_doubles(kSnapshotAllValues));
  s.shard = snapshot_shard(*rank);
  if (rank->has_reducer()) add_buckets(*rank, model, context, s);

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

namespace {
void add_buckets(const DdpRank& rank, const Model& model, const RankSnapshotContext& context, RankState& s) {
  const Reducer& reducer = rank.reducer();
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
      bucket.values = reducer.bucket_values(static_cast<int>(b), kSnapshotAllValues);
    }
    s.buckets.push_back(std::move(bucket));
  }
}
}  // namespace

void list_rank_memory(const DdpRank& rank, DeviceState& device, bool copy_values) {
  MemoryListing list(device, copy_values);
  const Model& model = rank.model();
  list.add(rank.input(), "input shard", TensorRole::Input, MemoryKind::Batch,
           "This rank's shard of the global batch (DistributedSampler's indices), copied to its device.");
  list.add(rank.target(), "labels", TensorRole::Target, MemoryKind::Batch, "The labels of this rank's shard.");
  // FSDP: the gathered flat parameter first, so the parameters (views of it) count in it once.
  list.add(rank.gathered_params(), "gathered flat parameter", TensorRole::Param, MemoryKind::Gathered,
           "Every rank's slice all-gathered into the full flat parameter, alive only while a forward or "
           "backward needs it.");
  list.add(rank.flat_param_shard(), "flat parameter slice", TensorRole::Param, MemoryKind::Parameters,
           "This rank's slice of the flat parameter: the only copy of these parameters it keeps.");
  for (const auto& [name, t] : rank.params().items())
    list.add_state(name, t, name, TensorRole::Param, MemoryKind::Parameters,
             "This rank's own module: every rank holds all the parameters, for the whole run.");
  for (const auto& [name, t] : rank.buffers().items())
    list.add_state(name, t, name, TensorRole::Buffer, MemoryKind::Parameters,
             "This rank's own buffer; with broadcast_buffers rank 0's overwrites it before each forward.");
  list.add(rank.flat_grads(), "flat gradient", TensorRole::Grad, MemoryKind::Gradients,
           "This rank's own gradient of the whole flat parameter, written by the backward, until the "
           "reduce-scatter.");
  list.add(rank.flat_grad_shard(), "flat gradient slice", TensorRole::Grad, MemoryKind::Gradients,
           "The mean over the ranks of the gradient of this rank's slice: what the reduce-scatter left it.");
  for (const auto& [name, g] : rank.grads().items())
    list.add_state(name, g, "grad " + name, TensorRole::Grad, MemoryKind::Gradients,
             "The parameter's .grad on this rank: its own gradient, then (after Finalize) the mean over the ranks.");
  rank.optimizer().for_each_state_tensor([&](const std::string& state_name, const std::string& name, const Tensor& t) {
    list.add_state(name, t, optimizer_state_label(state_name) + " " + name, TensorRole::Optimizer, MemoryKind::Optimizer,
                   optimizer_class_name(rank.optimizer().settings().kind) + std::string("'s ") + state_name +
                       ": every rank keeps its own, equal on all ranks.");
  });
  const auto& caches = rank.caches();
  for (int layer = 0; layer < static_cast<int>(caches.size()); ++layer) {
    const LayerCache& c = caches[static_cast<size_t>(layer)];
    const std::string l = std::to_string(layer);
    const std::string saved = "Saved by layer " + l + " for its backward.";
    list.add(c.input, "input of layer " + l, TensorRole::Activation, MemoryKind::Activations, saved);
    list.add(c.output, "activation " + l, TensorRole::Activation, MemoryKind::Activations,
             "Output of layer " + l + " on this rank's shard.");
    list.add(c.aux, "layer " + l + (model.layer(layer).is_batchnorm() ? " saved mean" : " saved columns"),
             TensorRole::Activation, MemoryKind::Activations, saved);
    list.add(c.aux2, "layer " + l + " saved invstd", TensorRole::Activation, MemoryKind::Activations, saved);
    list.add(c.var_b, "layer " + l + " saved variance", TensorRole::Activation, MemoryKind::Activations,
             "The variance this rank's shard was normalised with.");
  }
  list.add(rank.output(), "output", TensorRole::Output, MemoryKind::Activations,
           "This rank's own output, of its shard only: DDP gathers no output onto one device.");
  list.add(rank.output_grad(), "grad of output", TensorRole::Grad, MemoryKind::Activations,
           "d loss / d output of this rank's shard.");
  list.add(rank.flow(), "flow", TensorRole::Activation, MemoryKind::Activations,
           "What the next layer of the forward or backward takes.");
  if (!rank.has_reducer()) {
    list.finish();
    return;
  }
  const auto& buckets = rank.reducer().bucket_buffers();
  for (size_t b = 0; b < buckets.size(); ++b)
    list.add(buckets[b], "bucket " + std::to_string(b), TensorRole::Grad, MemoryKind::Buckets,
             "DDP's flat gradient bucket " + std::to_string(b) +
                 ": the gradients are copied in times 1/W and all-reduced in place.",
             -1, /*copy_values=*/false);
  list.finish();
}

}  // namespace dpv
