// Trainer, the plan of an iteration, and stepping through it.
#include "engine/data_parallel.h"

#include "engine/backend.h"
#include "engine/core_backends.h"
#include "engine/error.h"
#include "engine/parallel/iteration_impl.h"

namespace dpv {

std::vector<int64_t> chunk_sizes(int64_t n, int k) {
  check(k >= 1, "chunk expects `chunks` to be greater than 0, got: " + std::to_string(k));
  if (n == 0) return std::vector<int64_t>(static_cast<size_t>(k), 0);
  const int64_t split = (n + k - 1) / k;
  std::vector<int64_t> sizes;
  for (int64_t begin = 0; begin < n; begin += split) sizes.push_back(std::min(split, n - begin));
  return sizes;
}

void Trainer::set_learning_rate(double lr) {
  check_learning_rate(lr);
  options_.optimizer.lr = lr;
  optimizer_.set_learning_rate(lr);
}

Trainer::Trainer(std::shared_ptr<DeviceSet> devices, Model model, const TensorMap& state, TrainOptions options)
    : devices_(std::move(devices)), model_(std::move(model)), options_(options), optimizer_(options.optimizer) {
  check(devices_ && devices_->size() > 0, "no devices");
  model_.check_state(state);
  collectives_ = make_collectives(devices_);
  // model.cuda(): the original module lives on device_ids[0].
  for (const auto& d : model_.state_decls()) state_.set(d.name, state.at(d.name).to(devices_->shared(0)));
}

Trainer::~Trainer() = default;

std::string Trainer::transport() const { return collectives_->transport(); }

std::unique_ptr<StrategyIteration> Trainer::begin_iteration(const Tensor& input, const Tensor& target,
                                                            Observer* observer) {
  return std::make_unique<Iteration>(*this, input, target, observer);
}

const std::vector<Stage>& Trainer::plan(int replicas) {
  auto found = plans_.find(replicas);
  if (found != plans_.end()) return found->second;
  std::vector<Stage> plan;
  const bool multi = devices_->size() > 1;
  const int L = model_.num_layers();
  plan.push_back({StageKind::Scatter, -1,
                  multi ? "Scatter: split the batch into " + std::to_string(replicas) + " chunks"
                        : "Scatter: move the batch to device 0"});
  if (multi) plan.push_back({StageKind::Replicate, -1, "Replicate: broadcast parameters and buffers"});
  for (int i = 0; i < L; ++i)
    plan.push_back({StageKind::Forward, i, "Forward " + std::to_string(i) + ": " + model_.layer(i).describe()});
  if (multi) plan.push_back({StageKind::Gather, -1, "Gather: concatenate outputs on device 0"});
  plan.push_back({StageKind::Loss, -1, "Loss: cross-entropy on device 0"});
  if (multi) plan.push_back({StageKind::GradScatter, -1, "Backward: scatter the output gradient (Gather's backward)"});
  for (int i = L - 1; i >= 0; --i)
    plan.push_back({StageKind::Backward, i, "Backward " + std::to_string(i) + ": " + model_.layer(i).describe()});
  if (multi) plan.push_back({StageKind::ReduceGrads, -1, "Reduce: sum gradients onto device 0"});
  plan.push_back({StageKind::Step, -1, "Step: SGD update on device 0"});
  return plans_.emplace(replicas, std::move(plan)).first->second;
}

void Trainer::check_input(const Tensor& input) {
  if (!checked_input_shape_.empty() && input.shape() == checked_input_shape_ && input.dtype() == checked_input_dtype_)
    return;
  model_.check_input(input);
  checked_input_shape_ = input.shape();
  checked_input_dtype_ = input.dtype();
}

TensorMap Trainer::state_to_host() const {
  TensorMap out;
  for (const auto& [name, t] : state_.items()) out.set(name, t.to(nullptr));
  return out;
}

Iteration::Iteration(Trainer& trainer, const Tensor& input, const Tensor& target, Observer* observer)
    : trainer_(trainer), observer_(observer), snapshots_(observer && observer->wants_snapshots()) {
  const int k = trainer.devices().size();
  try {
    trainer.check_input(input);
  } catch (const Error& e) {
    // Inside DataParallel the first op fails in replica 0's thread and comes back wrapped.
    if (k > 1 && input.ndim() >= 1 && input.dim(0) > 0)
      throw e.reworded("Caught " + e.kind() + " in replica 0 on device 0. " + e.what()).at_replica(0, 0);
    throw;
  }
  check(target.dtype() == DType::Int64 && target.ndim() == 1,
        "the target must be a 1-D int64 tensor of class indices, got " + std::string(dtype_name(target.dtype())) + " " +
            shape_str(target.shape()),
        ErrorClass::ValueError);
  check(target.dim(0) == input.dim(0), "Expected input batch_size (" + std::to_string(input.dim(0)) +
                                           ") to match target batch_size (" + std::to_string(target.dim(0)) + ").",
        ErrorClass::ValueError);
  chunks_ = chunk_sizes(input.dim(0), k);
  impl_ = std::make_unique<Impl>(*this, trainer);
  impl_->input_dev0 = input.device() == &trainer.devices()[0] ? input : input.to(trainer.devices().shared(0));
  impl_->target_dev0 = target.device() == &trainer.devices()[0] ? target : target.to(trainer.devices().shared(0));
  plan_ = &trainer.plan(static_cast<int>(chunks_.size()));
}

Iteration::~Iteration() = default;

std::vector<int64_t> Iteration::output_rows() const {
  int64_t rows = 0;
  for (int64_t c : chunks_) rows += c;
  std::vector<int64_t> all(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) all[static_cast<size_t>(i)] = i;
  return all;
}

StageEvent Iteration::step() { return run_stage(true); }

StageEvent Iteration::run_stage(bool describe) {
  // Every stage passes here: the messages are built only when thrown.
  if (impl_->failed) throw Error("this iteration stopped at an error; start a new one");
  if (finished()) throw Error("the iteration is complete; start a new one");
  StageEvent e;
  e.index = next_;
  const Stage& stage = (*plan_)[static_cast<size_t>(next_)];
  if (describe) {
    e.stage = stage;
    e.chunk_sizes = chunks_;
  } else {
    e.stage.kind = stage.kind;
    e.stage.layer = stage.layer;
  }
  impl_->describe = describe;
  impl_->reset_busy();
  if (e.stage.kind == StageKind::Forward && e.stage.layer == 0) {
    bn_device_stats_.clear();
    bn_stats_.clear();
  }
  const size_t stats_before = bn_device_stats_.size();
  const bool follows_weight = e.stage.kind == StageKind::ReduceGrads || e.stage.kind == StageKind::Step;
  if (snapshots_ && follows_weight) impl_->weight_before_stage(e.stage.kind);
  e.t_start = impl_->now();
  try {
    switch (e.stage.kind) {
      case StageKind::Scatter: impl_->scatter(e); break;
      case StageKind::Replicate: impl_->replicate(e); break;
      case StageKind::Forward:
        if (trainer_.options().sync_bn && trainer_.model().layer(e.stage.layer).is_batchnorm() && impl_->R > 1)
          impl_->forward_sync_bn(e, e.stage.layer);
        else
          impl_->forward(e, e.stage.layer);
        break;
      case StageKind::Gather: impl_->gather(e); break;
      case StageKind::Loss: impl_->loss(e); break;
      case StageKind::GradScatter: impl_->grad_scatter(e); break;
      case StageKind::Backward:
        if (trainer_.options().sync_bn && trainer_.model().layer(e.stage.layer).is_batchnorm() && impl_->R > 1)
          impl_->backward_sync_bn(e, e.stage.layer);
        else
          impl_->backward(e, e.stage.layer);
        break;
      case StageKind::ReduceGrads: impl_->reduce_grads(e); break;
      case StageKind::Step: impl_->step_optimizer(e); break;
      default: throw Error(std::string("not a DataParallel stage: ") + stage_kind_name(e.stage.kind));
    }
  } catch (Error& error) {
    impl_->failed = true;
    error.at_stage(e.index);
    throw;
  } catch (...) {
    impl_->failed = true;
    throw;
  }
  e.t_end = impl_->now();
  if (snapshots_) {
    impl_->fill_snapshot(e);
    const auto& stats = batchnorm_stats();
    e.batchnorm.assign(stats.begin() + static_cast<std::ptrdiff_t>(stats_before), stats.end());
    if (e.stage.kind == StageKind::Loss) e.loss = loss();
    if (follows_weight) impl_->weight_after_stage(e);
  }
  ++next_;
  if (observer_) observer_->on_stage(e);
  return e;
}

double Iteration::loss() const {
  if (!loss_ && impl_->loss_tensor.defined()) loss_ = impl_->loss_tensor.item();
  return loss_.value_or(0.0);
}

const std::vector<BatchNormStats>& Iteration::batchnorm_stats() const {
  for (size_t i = bn_stats_.size(); i < bn_device_stats_.size(); ++i) {
    const DeviceStats& d = bn_device_stats_[i];
    std::vector<double> var;
    if (d.var_b.defined()) {
      var = d.var_b.to_doubles();
    } else {  // 1/invstd^2 - eps: the variance the synchronised statistics normalise with
      var = d.invstd.to_doubles();
      for (double& v : var) v = 1.0 / (v * v) - d.eps;
    }
    bn_stats_.push_back({d.layer, d.device, d.mean.to_doubles(), std::move(var), d.count});
  }
  return bn_stats_;
}

void Iteration::run_to_end() {
  while (!finished()) run_stage(observer_ != nullptr || snapshots_);
}

}  // namespace dpv
