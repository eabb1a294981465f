// The in-process DDP driver: the trainer (group + ranks) and the plan of one iteration.
#include <chrono>

#include "engine/backend.h"
#include "engine/ddp/ddp.h"
#include "engine/ddp/rank_snapshot.h"
#include "engine/error.h"
#include "engine/process_groups/in_process_group.h"
#include "engine/zero/zero_summaries.h"

namespace dpv {

DdpTrainer::DdpTrainer(std::shared_ptr<DeviceSet> devices, Model model, const TensorMap& state, DdpOptions options)
    : devices_(std::move(devices)), model_(std::move(model)), options_(options), initial_state_(state) {
  check(devices_ && devices_->size() > 0, "no devices");
  if (model_.parameter_decls().empty())
    throw Error("DistributedDataParallel is not needed when a module doesn't have any parameter that requires a "
                "gradient.");
  model_.check_state(state);
  bucket_bytes_cap(options_.bucket_cap_mb);
  group_ = make_in_process_group(devices_->size());
  const auto t0 = std::chrono::steady_clock::now();
  clock_ = [t0] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
}

DdpTrainer::~DdpTrainer() {
  // A rank may still have an all-reduce queued after a failure: wake it before the ranks go.
  if (broken_)
    for (auto& g : group_) abort_in_process_group(*g, "the trainer is being destroyed");
  ranks_.clear();
}

double DdpTrainer::now() const { return clock_(); }

DdpRank& DdpTrainer::rank(int r) const {
  check(constructed_, "DDP: the ranks are built by the first iteration's Construct stage");
  return *ranks_.at(static_cast<size_t>(r));
}

void DdpTrainer::set_learning_rate(double lr) {
  check_learning_rate(lr);
  options_.optimizer.lr = lr;
  for (auto& rank : ranks_) rank->set_learning_rate(lr);
}

StrategyTensors DdpTrainer::tensors() const {
  const DdpRank& rank0 = rank(0);
  return {&rank0.params(), &rank0.buffers(), &rank0.grads()};
}

void DdpTrainer::run_ranks(const std::function<void(int)>& fn, std::vector<double>& busy_start,
                           std::vector<double>& busy_end, bool independent) {
  check(!broken_, "a DDP rank failed earlier; start a new trainer");
  const int world = world_size();
  busy_start.assign(static_cast<size_t>(world), now());
  busy_end = busy_start;
  auto errors = devices_->run_parallel_collect(world, [&](int r) {
    busy_start[static_cast<size_t>(r)] = now();
    try {
      fn(r);
      (*devices_)[r].backend().synchronize();
    } catch (const std::exception& e) {
      // The others may be waiting for this rank in a collective: wake them (they throw too).
      abort_in_process_group(*group_[static_cast<size_t>(r)], "rank " + std::to_string(r) + " failed: " + e.what());
      busy_end[static_cast<size_t>(r)] = now();
      throw;
    }
    busy_end[static_cast<size_t>(r)] = now();
  }, independent ? DeviceSet::kIndependentWork : -1);
  // The cause is the first rank whose error is its own, not a collective woken by another's abort.
  int pick = -1;
  for (int r = 0; r < world && pick < 0; ++r) {
    if (!errors[static_cast<size_t>(r)]) continue;
    try {
      std::rethrow_exception(errors[static_cast<size_t>(r)]);
    } catch (const Error& e) {
      if (e.reason() != ErrorReason::GroupAborted) pick = r;
    } catch (const std::exception&) {
      pick = r;
    }
  }
  for (int r = 0; r < world && pick < 0; ++r)
    if (errors[static_cast<size_t>(r)]) pick = r;
  if (pick < 0) return;
  broken_ = true;
  try {
    std::rethrow_exception(errors[static_cast<size_t>(pick)]);
  } catch (Error& e) {
    e.at_rank(pick);
    throw;
  }
}

void DdpTrainer::construct() {
  if (constructed_) return;
  ranks_.resize(static_cast<size_t>(world_size()));
  std::vector<double> s, e;
  run_ranks(
      [&](int r) {
        ranks_[static_cast<size_t>(r)] = std::make_unique<DdpRank>(*group_[static_cast<size_t>(r)], devices_->shared(r),
                                                                   model_, initial_state_, options_, clock_);
      },
      s, e);
  constructed_ = true;
}

std::vector<DdpRankResult> DdpTrainer::results() const {
  std::vector<DdpRankResult> out;
  for (int r = 0; r < world_size(); ++r) out.push_back(rank(r).result());
  return out;
}

DdpIteration::DdpIteration(DdpTrainer& trainer, const Tensor& input, const Tensor& target, Observer* observer,
                           SamplerOptions sampler)
    : trainer_(trainer), input_(input), target_(target), observer_(observer) {
  const int world = trainer.world_size();
  const Model& model = trainer.model();
  // One iteration per step: the messages are built only when they are thrown.
  if (input.ndim() < 1) throw Error("the input must have a batch dimension; got a 0-dimensional tensor", ErrorClass::ValueError);
  if (target.dtype() != DType::Int64 || target.ndim() != 1)
    throw Error("the target must be a 1-D int64 tensor of class indices, got " + std::string(dtype_name(target.dtype())) +
                    " " + shape_str(target.shape()),
                ErrorClass::ValueError);
  if (target.dim(0) != input.dim(0))
    throw Error("Expected input batch_size (" + std::to_string(input.dim(0)) + ") to match target batch_size (" +
                    std::to_string(target.dim(0)) + ").",
                ErrorClass::ValueError);
  model.check_input(input);  // dtype, shapes, empty batch: what every rank's forward would raise
  for (int r = 0; r < world; ++r) {
    shards_.push_back(distributed_sampler_indices(input.dim(0), world, r, sampler));
    padding_.push_back(distributed_sampler_padding(input.dim(0), world, r, sampler));
  }
  snapshots_ = observer && observer->wants_snapshots();
  if (!trainer.constructed())
    plan_.push_back({StageKind::Construct, -1, "Construct: check the model across ranks, broadcast rank 0's state"});
  plan_.push_back({StageKind::Sample, -1, "Sample: DistributedSampler gives each rank its strided shard"});
  for (Stage& stage : rank_iteration_plan(model, trainer.options())) plan_.push_back(std::move(stage));
  t0_ = trainer.now();
}

std::unique_ptr<StrategyIteration> DdpTrainer::begin_iteration(const Tensor& input, const Tensor& target,
                                                               Observer* observer) {
  return std::make_unique<DdpIteration>(*this, input, target, observer);
}

double DdpIteration::loss() const { return trainer_.rank(0).loss(); }

std::vector<double> DdpIteration::rank_losses() const {
  std::vector<double> losses;
  for (int r = 0; r < trainer_.world_size(); ++r) losses.push_back(trainer_.rank(r).loss());
  return losses;
}

Tensor DdpIteration::output() const { return trainer_.rank(0).output(); }

std::vector<RankOutput> DdpIteration::rank_outputs() const {
  std::vector<RankOutput> outputs;
  for (int r = 0; r < trainer_.world_size(); ++r)
    outputs.push_back({trainer_.rank(r).output(), shards_.at(static_cast<size_t>(r))});
  return outputs;
}

StageEvent DdpIteration::step() {
  check(!failed_, "this iteration stopped at an error; start a new one");
  check(!finished(), "the iteration is complete; start a new one");
  StageEvent e = begin_event();
  RankReports reports(static_cast<size_t>(trainer_.world_size()));
  const bool independent = ranks_independent(e.stage);
  try {
    run_stage(e, reports, independent);
  } catch (Error& error) {
    failed_ = true;
    error.at_stage(e.index);
    throw;
  } catch (...) {
    failed_ = true;
    throw;
  }
  e.t_end = trainer_.now() - t0_;
  // The event reports rank 0's collectives, as it reports rank 0's loss.
  e.collectives = reports[0];
  for (const auto& r : e.collectives) e.bytes_moved += r.bytes;
  fill_devices(e);
  if (snapshots_) fill_ranks(e);
  ++next_;
  if (observer_) observer_->on_stage(e);
  return e;
}

StageEvent DdpIteration::begin_event() const {
  StageEvent e;
  e.index = next_;
  e.stage = plan_[static_cast<size_t>(next_)];
  for (const auto& s : shards_) e.chunk_sizes.push_back(static_cast<int64_t>(s.size()));
  e.t_start = trainer_.now() - t0_;
  return e;
}

bool DdpIteration::ranks_independent(const Stage& stage) const {
  // Whether the ranks' jobs of this stage never wait for one another: then a rank whose thread has
  // not started yet may run on another rank's thread (DeviceSet's stealing), as DataParallel's
  // replicas do. Not so for a collective the ranks' own threads meet in: the buffer broadcast,
  // construction, and SyncBatchNorm's statistics. Bucket all-reduces are started, not waited for,
  // during the backward, and at Finalize every rank has started all of them.
  const int layer = stage.layer;
  const bool sync_bn_layer = layer >= 0 && trainer_.options().sync_bn && trainer_.world_size() > 1 &&
                             trainer_.model().layer(layer).is_batchnorm();
  // A communication hook runs its blocking collectives inside the backward, on the ranks' own
  // threads (Reducer::run_hook): with a hook the backward is a meeting too.
  const bool hook_in_backward =
      stage.kind == StageKind::Backward && trainer_.options().comm_hook.kind != CommHookKind::None;
  return !hook_in_backward && stage.kind != StageKind::Construct && stage.kind != StageKind::BroadcastBuffers &&
         stage.kind != StageKind::GatherParams && stage.kind != StageKind::ReduceScatter &&
         stage.kind != StageKind::BroadcastParams && !sync_bn_layer;
}

void DdpIteration::on_ranks(bool independent, const RankJob& fn) {
  trainer_.run_ranks([&](int r) { fn(trainer_.rank(r), r); }, busy_start_, busy_end_, independent);
}

void DdpIteration::run_stage(StageEvent& e, RankReports& reports, bool independent) {
  const int layer = e.stage.layer;
  switch (e.stage.kind) {
    case StageKind::Construct:
      trainer_.construct();
      e.summary = "Every rank checks that all ranks hold the same parameters (an all-gather of the counts, then "
                  "rank 0's shapes), and rank 0's whole state dict is broadcast, so every rank starts equal.";
      break;
    case StageKind::Sample: sample_stage(e, independent); break;
    case StageKind::BroadcastBuffers:
      on_ranks(independent, [&](DdpRank& rank, int r) { reports[static_cast<size_t>(r)] = rank.sync_buffers(); });
      e.summary = "broadcast_buffers=True: rank 0's BatchNorm running statistics overwrite every other rank's "
                  "before the forward.";
      break;
    case StageKind::Forward: forward_stage(e, reports, independent); break;
    case StageKind::Loss:
      on_ranks(independent, [&](DdpRank& rank, int) { rank.compute_loss(); });
      loss_computed_ = true;
      e.loss = trainer_.rank(0).loss();
      e.summary = "Every rank computes the mean cross-entropy of its own shard; losses are not averaged "
                  "(rank 0 prints its own).";
      break;
    case StageKind::Backward:
      backward_started_ = true;
      on_ranks(independent, [&](DdpRank& rank, int r) {
        reports[static_cast<size_t>(r)] = rank.backward_layer(layer);
      });
      e.summary = backward_summary(trainer_.rank(0), layer);
      break;
    case StageKind::Finalize: finalize_stage(e, reports, independent); break;
    case StageKind::Step:
      on_ranks(independent, [&](DdpRank& rank, int) { rank.optimizer_step(); });
      e.summary = step_summary(trainer_.rank(0));
      break;
    case StageKind::GatherParams: case StageKind::FreeParams: case StageKind::ReduceScatter:
    case StageKind::BroadcastParams:
      on_ranks(independent, [&](DdpRank& rank, int r) { reports[static_cast<size_t>(r)] = rank.run_stage(e.stage); });
      e.summary = sharding_summary(trainer_.rank(0), e.stage.kind, gathered_once_);
      if (e.stage.kind == StageKind::GatherParams) gathered_once_ = true;
      break;
    default: throw Error(std::string("not a DDP stage: ") + stage_kind_name(e.stage.kind));
  }
}

void DdpIteration::sample_stage(StageEvent& e, bool independent) {
  on_ranks(independent, [&](DdpRank& rank, int r) {
    // Stage by stage, .grad is a tensor of its own (PyTorch's default layout): snapshots show
    // it before the averaging, and memory listings the buckets beside it.
    rank.set_gradients_in_buckets(false);
    rank.set_fuse_batchnorm_relu(false);  // snapshots show each BatchNorm's own output
    rank.set_batch(input_, target_, shards_[static_cast<size_t>(r)]);
  });
  e.summary = "DistributedSampler: rank r takes indices r, r+W, r+2W, ... of the padded global batch (" +
              std::to_string(input_.dim(0)) + " samples, " + std::to_string(shards_[0].size()) + " per rank).";
}

void DdpIteration::forward_stage(StageEvent& e, RankReports& reports, bool independent) {
  const int layer = e.stage.layer;
  if (layer == 0) bn_stats_.clear();
  on_ranks(independent, [&](DdpRank& rank, int r) { reports[static_cast<size_t>(r)] = rank.forward_layer(layer); });
  // Every rank's own statistics, and the global ones (device < 0) once, from rank 0.
  for (int r = 0; r < trainer_.world_size(); ++r)
    for (const auto& s : trainer_.rank(r).batchnorm_stats())
      if (s.layer == layer && (s.device >= 0 || r == 0)) e.batchnorm.push_back(s);
  bn_stats_.insert(bn_stats_.end(), e.batchnorm.begin(), e.batchnorm.end());
  e.summary = "Every rank runs " + trainer_.model().layer(layer).describe() + " on its own shard.";
}

void DdpIteration::finalize_stage(StageEvent& e, RankReports& reports, bool independent) {
  on_ranks(independent, [&](DdpRank& rank, int) { rank.finalize(); });
  finalized_ = true;
  // Every rank's bucket runs go on the timeline; rank 0's reports stand for the stage's collectives.
  for (int r = 0; r < trainer_.world_size() && trainer_.rank(0).has_reducer(); ++r) {
    const DdpRank& rank = trainer_.rank(r);
    const auto names = rank.reducer().bucket_names();
    for (const BucketRun& b : rank.reducer().runs()) {
      CommSpan span{r, b.bucket, b.launch - t0_, b.start - t0_, b.end - t0_, b.bytes,
                    names[static_cast<size_t>(b.bucket)], b.report, b.ring};
      e.comm.push_back(span);
      if (r == 0) reports[0].push_back(b.report);
    }
  }
  e.summary = "Each rank waits for its bucket all-reduces and copies the averaged gradients back into "
              ".grad: every rank now holds the MEAN of the ranks' gradients.";
}

void DdpIteration::fill_devices(StageEvent& e) const {
  DeviceSet& devs = trainer_.devices();
  for (int d = 0; d < devs.size(); ++d) {
    DeviceState s;
    s.device = d;
    s.label = devs[d].label();
    s.has_replica = trainer_.constructed();
    s.chunk_rows = static_cast<int64_t>(shards_[static_cast<size_t>(d)].size());
    s.memory_bytes = devs[d].memory().current.load();
    s.memory_peak = devs[d].memory().peak.load();
    if (d < static_cast<int>(busy_start_.size())) {
      s.busy_start = busy_start_[static_cast<size_t>(d)] - t0_;
      s.busy_end = busy_end_[static_cast<size_t>(d)] - t0_;
    }
    if ((snapshots_ || memory_accounts_) && trainer_.constructed()) list_rank_memory(trainer_.rank(d), s, snapshots_);
    e.devices.push_back(std::move(s));
  }
}

void DdpIteration::fill_ranks(StageEvent& e) const {
  RankSnapshotContext context;
  context.backward_started = backward_started_;
  context.finalized = finalized_;
  context.loss_computed = loss_computed_;
  for (int r = 0; r < trainer_.world_size(); ++r) {
    context.samples = shards_[static_cast<size_t>(r)];
    context.padding = padding_[static_cast<size_t>(r)];
    const DdpRank* rank = trainer_.constructed() ? &trainer_.rank(r) : nullptr;
    e.ranks.push_back(snapshot_rank(rank, r, trainer_.model(), context));
  }
}

void DdpIteration::run_to_end() {
  // Nobody watches the stages: every rank runs the rest of the iteration on its own thread, the
  // same DdpRank stage calls in the same order, meeting the others only where DDP's ranks meet (the
  // buffer broadcast, SyncBatchNorm's statistics, the bucket all-reduces), as DDP's processes do,
  // instead of at a barrier after every stage. Observed or snapshotted iterations go stage by stage.
  // (Measured on 2 cores with another program busy: going stage by stage there, with the ranks'
  // independent work on the one free core, was slower than running through: 0.81x against 0.91x of
  // one device on the large MLP, so the ranks run through whatever the load.)
  if (observer_ == nullptr && !snapshots_ && !failed_ && next_ == 0) {
    run_ranks_through();
    return;
  }
  while (!finished()) step();
}

void DdpIteration::run_ranks_through() {
  const int world = trainer_.world_size();
  const Model& model = trainer_.model();
  const int L = model.num_layers();
  try {
    if (!trainer_.constructed()) trainer_.construct();
    // Not `independent`: a rank's Finalize waits for all-reduces every other rank must start.
    trainer_.run_ranks(
        [&](int r) {
          DdpRank& rank = trainer_.rank(r);
          rank.set_gradients_in_buckets(true);  // nobody looks at .grad before the averaging
          rank.set_fuse_batchnorm_relu(true);   // nor at an activation
          rank.set_batch(input_, target_, shards_[static_cast<size_t>(r)]);
          rank.run_iteration();  // the plan's stages from BroadcastBuffers to Step, in order
        },
        busy_start_, busy_end_);
  } catch (...) {
    failed_ = true;
    throw;
  }
  // What the Forward stages collect: per layer, every rank's own statistics and the global ones once.
  bn_stats_.clear();
  for (int layer = 0; layer < L; ++layer)
    for (int r = 0; r < world; ++r)
      for (const auto& s : trainer_.rank(r).batchnorm_stats())
        if (s.layer == layer && (s.device >= 0 || r == 0)) bn_stats_.push_back(s);
  backward_started_ = loss_computed_ = finalized_ = true;
  next_ = static_cast<int>(plan_.size());
}

}  // namespace dpv
