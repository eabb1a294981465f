// One DDP rank: construction, buffer broadcast, forward, loss, backward with the Reducer,
// finalize, optimizer step; and run_rank_steps for launched processes.
#include "engine/ddp/ddp_rank.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "engine/backend.h"
#include "engine/ddp/comm_hooks/hook_output.h"
#include "engine/ddp/sampler.h"
#include "engine/ddp/sync_bn.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/layers/batchnorm.h"
#include "engine/strategy.h"

namespace dpv {

std::vector<std::string> ready_order_in_layer(const Layer& layer, DType dtype) {
  std::vector<std::string> names;
  for (const auto& d : layer.parameters(dtype)) names.push_back(d.name);
  if (layer.type() == "Linear") std::reverse(names.begin(), names.end());  // bias, then weight
  return names;
}

namespace {
std::function<double()> default_clock() {
  const auto t0 = std::chrono::steady_clock::now();
  return [t0] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
}

// "[300, 4]" as c10 prints IntArrayRef.
std::string sizes_str(const Shape& s) { return shape_str(s); }

// dist._broadcast_coalesced (torch/csrc/distributed/c10d/comm.cpp, 1.13), as DDP syncs its module
// states and buffers: the tensors are grouped by dtype (take_tensors; DDP's 250 MiB bucket is
// never reached by these models), each group flattened into one buffer, broadcast from `root` in
// one call, and copied back. One report per group.
std::vector<CollectiveReport> broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor*>& tensors, int root,
                                                  const std::shared_ptr<Device>& device) {
  std::vector<DType> dtypes;  // in order of first appearance
  for (const Tensor* t : tensors)
    if (std::find(dtypes.begin(), dtypes.end(), t->dtype()) == dtypes.end()) dtypes.push_back(t->dtype());
  std::vector<CollectiveReport> reports;
  for (DType dtype : dtypes) {
    int64_t numel = 0;
    for (const Tensor* t : tensors)
      if (t->dtype() == dtype) numel += t->numel();
    Tensor flat = Tensor::empty({numel}, dtype, device);  // [sum of the group's numels]
    auto each = [&](const std::function<void(Tensor& part, Tensor& t)>& fn) {
      int64_t offset = 0;
      for (Tensor* t : tensors) {
        if (t->dtype() != dtype) continue;
        Tensor part = flat.slice0(offset, offset + t->numel()).reshape(t->shape());
        fn(part, *t);
        offset += t->numel();
      }
    };
    if (group.rank() == root) each([](Tensor& part, Tensor& t) { part.copy_from(t); });
    reports.push_back(group.broadcast(flat, root));
    if (group.rank() != root) each([](Tensor& part, Tensor& t) { t.copy_from(part); });
  }
  return reports;
}

std::vector<Tensor*> tensors_of(TensorMap& map) {
  std::vector<Tensor*> out;
  for (auto& [name, t] : map.items()) out.push_back(&t);
  return out;
}
}  // namespace

void DdpRank::set_learning_rate(double lr) {
  check_learning_rate(lr);
  options_.optimizer.lr = lr;
  optimizer_.set_learning_rate(lr);
}

DdpRank::DdpRank(ProcessGroup& group, std::shared_ptr<Device> device, const Model& model, const TensorMap& state,
                 DdpOptions options, std::function<double()> clock)
    : group_(group),
      device_(std::move(device)),
      model_(model),
      options_(options),
      optimizer_(options.optimizer),
      clock_(std::move(clock)),
      // In-process ranks on host memory: bucket all-reduces on the group's thread, the rest inline.
      comm_(!(group.starts_all_reduce_on_host() && device_->kind() == DeviceKind::Cpu), &device_->backend()) {
  if (!clock_) clock_ = default_clock();
  construct(state);
}

DdpRank::~DdpRank() = default;

void DdpRank::construct(const TensorMap& state) {
  const auto decls = model_.parameter_decls();
  if (decls.empty())
    throw Error("DistributedDataParallel is not needed when a module doesn't have any parameter that requires a "
                "gradient.");
  model_.check_state(state);
  std::unique_ptr<CommHook> hook = make_rank_comm_hook();  // refused before any collective, on every rank alike
  const int world = group_.size(), me = group_.rank();
  // _verify_param_shape_across_processes: first the counts (all-gather), then rank 0's sizes.
  Tensor count = Tensor::from_int64({1}, {static_cast<int64_t>(decls.size())}).to(device_);
  Tensor counts = Tensor::zeros({world}, DType::Int64, device_);
  comm_.run([&] { group_.all_gather(count, counts); });
  const auto all = counts.to_int64();
  for (int i = 0; i < world; ++i)
    check(all[static_cast<size_t>(i)] == static_cast<int64_t>(decls.size()),
          "DDP expects same model across all ranks, but Rank " + std::to_string(me) + " has " +
              std::to_string(decls.size()) + " params, while rank " + std::to_string(i) + " has inconsistent " +
              std::to_string(all[static_cast<size_t>(i)]) + " params.");
  // Per parameter [ndim, size0..size3] (fixed width so every rank broadcasts the same length).
  constexpr int kWidth = 5;
  std::vector<int64_t> meta(decls.size() * kWidth, -1);
  for (size_t p = 0; p < decls.size(); ++p) {
    meta[p * kWidth] = static_cast<int64_t>(decls[p].shape.size());
    for (size_t d = 0; d < decls[p].shape.size() && d + 1 < kWidth; ++d) meta[p * kWidth + 1 + d] = decls[p].shape[d];
  }
  Tensor control = Tensor::from_int64({static_cast<int64_t>(meta.size())}, meta).to(device_);
  comm_.run([&] { group_.broadcast(control, 0); });
  const auto rank0 = control.to_int64();
  for (size_t p = 0; p < decls.size(); ++p)
    for (int k = 0; k < kWidth; ++k)
      if (rank0[p * kWidth + static_cast<size_t>(k)] != meta[p * kWidth + static_cast<size_t>(k)]) {
        std::string msg = "[";  // appended piecewise: GCC 12 warns falsely (-Wrestrict) on "[" + to_string
        msg += std::to_string(me);
        msg += "]: params[" + std::to_string(p) + "] in this process with sizes " + sizes_str(decls[p].shape) +
               " appears not to match sizes of the same param in process 0.";
        throw Error(msg);
      }

  // module.to(device), then _sync_module_states: rank 0's parameters and buffers to every rank.
  replica_.device = device_;
  replica_.caches.resize(static_cast<size_t>(model_.num_layers()));
  for (const auto& d : decls) replica_.params.set(d.name, state.at(d.name).to(device_));
  for (const auto& d : model_.buffer_decls()) replica_.buffers.set(d.name, state.at(d.name).to(device_));
  std::vector<Tensor*> states = tensors_of(replica_.params);
  for (Tensor* t : tensors_of(replica_.buffers)) states.push_back(t);
  comm_.run([&] { broadcast_coalesced(group_, states, 0, device_); });

  std::vector<BucketParam> params;
  for (const auto& d : decls) {
    param_names_.push_back(d.name);
    params.push_back({shape_numel(d.shape), d.dtype});
  }
  // Per layer, its parameters' indices in the order their gradients become ready.
  for (int layer = 0; layer < model_.num_layers(); ++layer) {
    ready_in_layer_.emplace_back();
    for (const auto& name : ready_order_in_layer(model_.layer(layer), model_.dtype())) {
      const std::string full = model_.layer_prefix(layer) + name;
      size_t index = 0;
      while (param_names_[index] != full) ++index;
      ready_in_layer_.back().push_back(index);
    }
  }
  // FSDP has no buckets: its flat gradient is reduce-scattered whole.
  if (options_.zero_stage < 2)
    reducer_ = std::make_unique<Reducer>(group_, comm_, device_, param_names_, params, options_.bucket_cap_mb, clock_,
                                         options_.first_bucket_bytes);
  if (hook) {
    std::vector<Shape> shapes;
    for (const auto& d : decls) shapes.push_back(d.shape);
    reducer_->set_comm_hook(std::move(hook), std::move(shapes));
  }
  shard_after_construct();
}

std::unique_ptr<CommHook> DdpRank::make_rank_comm_hook() const {
  const CommHookOptions& hook = options_.comm_hook;
  if (hook.kind == CommHookKind::None) return nullptr;
  // register_comm_hook is DistributedDataParallel's: ZeroRedundancyOptimizer's overlap hooks and
  // FSDP's own hooks work differently.
  check(options_.zero_stage == 0,
        std::string("a DDP communication hook (") + comm_hook_name(hook.kind) + ") runs only with plain DDP, not with "
            "ZeRO stage " + std::to_string(options_.zero_stage) + ": FSDP and ZeroRedundancyOptimizer register hooks "
            "of their own; drop the hook or the ZeRO stage",
        ErrorClass::ValueError);
  check(device_->kind() == DeviceKind::Cpu,
        std::string(comm_hook_name(hook.kind)) + " runs on CPU devices here (simulated ones, or Gloo ranks); this "
            "rank's device is " + device_->name(),
        ErrorClass::ValueError);
  return make_comm_hook(hook, group_);
}

std::optional<HookErrorMeasure> DdpRank::hook_error() const {
  return reducer_ ? reducer_->hook_error() : std::nullopt;
}

const Reducer& DdpRank::reducer() const {
  check(reducer_ != nullptr, "FSDP (ZeRO-2/3) has no DDP Reducer: its gradients are reduce-scattered");
  return *reducer_;
}

LayerRun DdpRank::layer_run(int layer) {
  LayerRun run{device_->backend(), replica_, replica_.caches[static_cast<size_t>(layer)], model_.layer_prefix(layer)};
  run.need_input_grad = layer > 0;
  const bool synchronised = options_.sync_bn && world_size() > 1;  // SyncBatchNorm normalises on its own
  run.fuse_next_relu = fuse_batchnorm_relu_ && !synchronised && model_.layer(layer).is_batchnorm() &&
                       layer + 1 < model_.num_layers() && model_.layer(layer + 1).is_relu();
  run.relu_done_before = layer > 0 && replica_.caches[static_cast<size_t>(layer - 1)].relu_fused;
  return run;
}

void DdpRank::set_batch(const Tensor& global_input, const Tensor& global_target, const std::vector<int64_t>& indices) {
  // Every step passes here: the messages are built only when they are thrown.
  if (global_target.dtype() != DType::Int64 || global_target.ndim() != 1)
    throw Error("the target must be a 1-D int64 tensor of class indices, got " +
                    std::string(dtype_name(global_target.dtype())) + " " + shape_str(global_target.shape()),
                ErrorClass::ValueError);
  if (global_input.ndim() < 1 || global_target.dim(0) != global_input.dim(0))
    throw Error("Expected input batch_size (" + std::to_string(global_input.ndim() >= 1 ? global_input.dim(0) : 0) +
                    ") to match target batch_size (" + std::to_string(global_target.dim(0)) + ").",
                ErrorClass::ValueError);
  for (const int64_t i : indices)
    if (i < 0 || i >= global_input.dim(0)) throw Error("sample index " + std::to_string(i) + " is out of range");
  // The rows are gathered on the host into one contiguous buffer per tensor, which then crosses to
  // the device in one copy (a DataLoader's collated batch, then .to(device)): two copies per rank,
  // not two per sample. A batch held on a device comes to the host once first.
  const Tensor host_input = global_input.on_host_memory() ? global_input : global_input.to(nullptr);
  const Tensor host_target = global_target.on_host_memory() ? global_target : global_target.to(nullptr);
  Shape shape = global_input.shape();
  shape[0] = static_cast<int64_t>(indices.size());
  Tensor in = Tensor::empty(shape, global_input.dtype(), device_);  // [n_r, ...]
  Tensor tg = Tensor::empty({shape[0]}, DType::Int64, device_);     // [n_r]
  // Host memory devices (simulated CPU ranks) take the rows directly; a GPU gets a host staging copy.
  Tensor in_rows = in.on_host_memory() ? in : Tensor::empty(shape, global_input.dtype());
  Tensor tg_rows = tg.on_host_memory() ? tg : Tensor::empty({shape[0]}, DType::Int64);
  const size_t row_bytes = indices.empty() ? 0 : in_rows.nbytes() / indices.size();
  for (size_t k = 0; k < indices.size(); ++k) {
    const size_t i = static_cast<size_t>(indices[k]);
    std::memcpy(static_cast<char*>(in_rows.raw()) + k * row_bytes,
                static_cast<const char*>(host_input.raw()) + i * row_bytes, row_bytes);
    tg_rows.data<int64_t>()[k] = host_target.data<int64_t>()[i];
  }
  if (in_rows.raw() != in.raw()) in.copy_from(in_rows);
  if (tg_rows.raw() != tg.raw()) tg.copy_from(tg_rows);
  model_.check_input(in);
  input_ = in;
  target_ = tg;
  indices_ = indices;
}

bool DdpRank::will_sync_buffers() const { return options_.broadcast_buffers && !replica_.buffers.empty(); }

std::vector<CollectiveReport> DdpRank::sync_buffers() {
  // DDP.forward rebuilds the buckets (after iteration 1) before it syncs the buffers; forward_layer(0)
  // asks again, which does nothing once they are rebuilt.
  if (reducer_) reducer_->prepare_for_forward();
  std::vector<CollectiveReport> reports;
  if (!will_sync_buffers()) return reports;
  comm_.run([&] { reports = broadcast_coalesced(group_, tensors_of(replica_.buffers), 0, device_); });
  return reports;
}

std::vector<CollectiveReport> DdpRank::forward_layer(int layer) {
  check(input_.defined(), "DDP: set the batch before the forward");
  if (layer == 0) {
    if (reducer_) reducer_->prepare_for_forward();  // DDP.forward: the one bucket rebuild, before the second forward
    flow_ = input_;
    bn_stats_.clear();
  }
  std::vector<CollectiveReport> reports;
  Layer& l = model_.layer(layer);
  LayerRun run = layer_run(layer);
  // SyncBatchNorm synchronises only across two or more ranks (PyTorch's need_sync): on one rank it
  // runs as BatchNorm.
  if (l.is_batchnorm() && options_.sync_bn && world_size() > 1) {
    BatchNormStats local, global;
    flow_ = sync_bn_forward(static_cast<const BatchNorm&>(l), run, flow_, group_, comm_, reports, local, global);
    local.layer = global.layer = layer;
    local.device = rank();
    global.device = -1;
    bn_stats_.push_back(local);
    bn_stats_.push_back(global);
  } else {
    flow_ = l.forward(run, flow_);
    if (l.is_batchnorm()) {
      const LayerCache& c = run.cache;
      bn_stats_.push_back({layer, rank(), c.aux.to_doubles(), c.var_b.to_doubles(), c.count});
      // With nothing to merge, the whole batch's statistics are this rank's own; they are reported
      // as global like any synchronised run reports them (as DataParallel does on one replica).
      if (options_.sync_bn) {
        BatchNormStats global = bn_stats_.back();
        global.device = -1;
        bn_stats_.push_back(std::move(global));
      }
    }
  }
  if (layer == model_.num_layers() - 1) output_ = flow_;
  return reports;
}

void DdpRank::compute_loss() {
  check(flow_.defined() && flow_.ndim() == 2, "CrossEntropyLoss expects logits [N, classes], got " +
                                                  (flow_.defined() ? shape_str(flow_.shape()) : std::string("nothing")));
  Tensor loss = Tensor::empty({}, flow_.dtype(), device_);
  dlogits_ = Tensor::empty(flow_.shape(), flow_.dtype(), device_);  // [n_r, K]
  device_->backend().cross_entropy(flow_, target_, loss, dlogits_, 1.0);
  loss_ = loss.item();
}

std::vector<CollectiveReport> DdpRank::backward_layer(int layer) {
  std::vector<CollectiveReport> reports;
  const int L = model_.num_layers();
  if (layer == L - 1) {
    check(dlogits_.defined(), "DDP: compute the loss before the backward");
    replica_.grads = TensorMap{};  // optimizer.zero_grad(set_to_none=True)
    replica_.grad_homes = TensorMap{};
    if (!reducer_) {
      start_flat_gradients();
    } else {
      reducer_->set_gradients_in_buckets(gradients_in_buckets_);
      const auto& probes = options_.probe_hook_error_at;
      reducer_->set_hook_error_probe(std::find(probes.begin(), probes.end(), iterations_ + 1) != probes.end());
      reducer_->prepare_for_backward();
    }
    if (reducer_ && gradients_in_buckets_) {
      const auto& decls = model_.parameter_decls();
      for (size_t p = 0; p < param_names_.size(); ++p)
        replica_.grad_homes.set(param_names_[p], reducer_->gradient_view(p).reshape(decls[p].shape));
    }
    flow_ = dlogits_;
  }
  Layer& l = model_.layer(layer);
  LayerRun run = layer_run(layer);
  if (l.is_batchnorm() && options_.sync_bn && world_size() > 1)
    flow_ = sync_bn_backward(static_cast<const BatchNorm&>(l), run, flow_, group_, comm_, reports);
  else
    flow_ = l.backward(run, flow_);
  // AccumulateGrad fires for this layer's parameters now: hand them to the Reducer.
  if (reducer_)
    for (size_t index : ready_in_layer_[static_cast<size_t>(layer)])
      reducer_->mark_ready(index, replica_.grads.at(param_names_[index], "the rank's gradients"));
  return reports;
}

void DdpRank::set_gradients_in_buckets(bool on) {
  if (gradients_in_buckets_ && !on)
    for (auto& [name, g] : replica_.grads.items()) g = g.clone();
  gradients_in_buckets_ = on;
}

void DdpRank::finalize() {
  check(reducer_ != nullptr, "FSDP (ZeRO-2/3) reduce-scatters its gradients: there are no buckets to finalize");
  reducer_->finalize(replica_.grads);
  ++iterations_;
}

void DdpRank::optimizer_step() {
  if (options_.zero_stage > 0) {
    step_shards();
  } else {
    Backend& be = device_->backend();
    for (const auto& name : param_names_)
      optimizer_.step(name, replica_.params.at(name), replica_.grads.at(name, "the gradients"), be, device_);
    be.synchronize();
  }
  ++steps_;
}

void DdpRank::run_iteration() {
  sync_buffers();  // also DDP.forward's bucket rebuild when there is no buffer to broadcast
  for (const Stage& stage : rank_iteration_plan(model_, options_))
    if (stage.kind != StageKind::BroadcastBuffers) run_stage(stage);
}

std::vector<CollectiveReport> DdpRank::run_stage(const Stage& stage) {
  switch (stage.kind) {
    case StageKind::BroadcastBuffers: return sync_buffers();
    case StageKind::GatherParams: return gather_params();
    case StageKind::Forward: return forward_layer(stage.layer);
    case StageKind::FreeParams: free_params(); return {};
    case StageKind::Loss: compute_loss(); return {};
    case StageKind::Backward: return backward_layer(stage.layer);
    case StageKind::Finalize: finalize(); return {};
    case StageKind::ReduceScatter: return reduce_scatter_gradients();
    case StageKind::Step: optimizer_step(); return {};
    case StageKind::BroadcastParams: return broadcast_params();
    case StageKind::Scatter: case StageKind::Replicate: case StageKind::Gather: case StageKind::GradScatter:
    case StageKind::ReduceGrads: case StageKind::Construct: case StageKind::Sample: break;
  }
  throw Error("a DDP rank has no stage " + stage.title);
}

std::vector<Stage> rank_iteration_plan(const Model& model, const DdpOptions& options) {
  const int L = model.num_layers(), zero = options.zero_stage;
  std::vector<Stage> plan;
  if (options.broadcast_buffers && !model.buffer_decls().empty())
    plan.push_back({StageKind::BroadcastBuffers, -1, "Broadcast buffers: rank 0's buffers to every rank"});
  if (zero >= 2)
    plan.push_back({StageKind::GatherParams, -1, "All-gather params: every rank's slice into the full flat parameter"});
  for (int i = 0; i < L; ++i)
    plan.push_back({StageKind::Forward, i, "Forward " + std::to_string(i) + ": " + model.layer(i).describe()});
  if (zero == 3) plan.push_back({StageKind::FreeParams, -1, "Free params: keep only this rank's slice"});
  plan.push_back({StageKind::Loss, -1, "Loss: cross-entropy on every rank's shard"});
  if (zero == 3)
    plan.push_back({StageKind::GatherParams, -1, "All-gather params again for the backward"});
  for (int i = L - 1; i >= 0; --i)
    plan.push_back({StageKind::Backward, i, "Backward " + std::to_string(i) + ": " + model.layer(i).describe()});
  if (zero >= 2)
    plan.push_back({StageKind::ReduceScatter, -1, "Reduce-scatter: each rank keeps the averaged gradient of its slice"});
  else
    plan.push_back({StageKind::Finalize, -1, "Finalize: wait for the bucket all-reduces, averaged gradients into .grad"});
  const std::string optimizer = optimizer_class_name(options.optimizer.kind);
  if (zero == 0) plan.push_back({StageKind::Step, -1, "Step: " + optimizer + " update on every rank"});
  if (zero == 1) {
    plan.push_back({StageKind::Step, -1, "Step: each rank's " + optimizer + " updates only its own parameters"});
    plan.push_back({StageKind::BroadcastParams, -1, "Broadcast params: each rank sends the parameters it stepped"});
  }
  if (zero >= 2) plan.push_back({StageKind::Step, -1, "Step: each rank's " + optimizer + " updates its slice"});
  return plan;
}

DdpRankResult DdpRank::result() const {
  DdpRankResult r;
  r.rank = rank();
  r.output = output_.defined() ? output_.to(nullptr) : Tensor();
  r.loss = loss_;
  for (const auto& d : model_.state_decls()) {
    const Tensor* t = replica_.params.find(d.name);
    if (!t) t = replica_.buffers.find(d.name);
    if (t) r.state.set(d.name, t->to(nullptr));  // ZeRO-2/3: the parameters are in the flat slices
  }
  for (const auto& name : param_names_)
    if (const Tensor* g = replica_.grads.find(name)) r.grads.set(name, g->to(nullptr));
  r.batchnorm = bn_stats_;
  if (reducer_) {
    r.buckets = reducer_->bucket_names();
    r.ready_order = reducer_->ready_order();
    r.bucket_runs = reducer_->runs();
    if (const CommHook* hook = reducer_->comm_hook()) add_comm_hook_state(r.comm_hook_state, *hook, rank());
  }
  r.sample_indices = indices_;
  add_sharded_result(r);
  return r;
}

DdpRankResult run_rank_steps(ProcessGroup& group, std::shared_ptr<Device> device, const Model& model,
                             const TensorMap& state, const Tensor& global_input, const Tensor& global_target,
                             const DdpOptions& options, int steps) {
  check(steps >= 1, "steps must be at least 1, got " + std::to_string(steps), ErrorClass::ValueError);
  DdpRank ddp(group, std::move(device), model, state, options);
  ddp.set_gradients_in_buckets(true);  // nobody looks at .grad before the averaging
  ddp.set_fuse_batchnorm_relu(true);    // nor at an activation
  check(global_input.ndim() >= 1, "the input must have a batch dimension; got a 0-dimensional tensor", ErrorClass::ValueError);
  SamplerOptions sampler;
  sampler.shuffle = false;
  const auto indices = distributed_sampler_indices(global_input.dim(0), group.size(), group.rank(), sampler);
  for (int s = 0; s < steps; ++s) {
    ddp.set_batch(global_input, global_target, indices);
    ddp.run_iteration();
  }
  return ddp.result();
}

}  // namespace dpv
