// The sharded strategies on one DDP rank (engine/ddp/ddp_rank.h, options.zero_stage):
// ZeroRedundancyOptimizer's partitioned step and parameter broadcast (ZeRO-1), and FSDP's flat
// parameter with its all-gathers, frees and gradient reduce-scatter (ZeRO-2, ZeRO-3). The forward,
// loss and backward are DDP's own; only what happens to parameters, gradients and optimizer state
// around them differs.
#include <algorithm>

#include "engine/backend.h"
#include "engine/ddp/ddp_rank.h"
#include "engine/error.h"

namespace dpv {
namespace {

// The name of the one flat parameter in the optimizer (its state is the slice's).
constexpr const char* kFlatParam = "flat";

// Elements [lo, hi) of the flat parameter that `entry` and the slice [begin, end) share.
struct Overlap {
  int64_t lo = 0, hi = 0;
  bool empty() const { return lo >= hi; }
};
Overlap overlap(const FlatEntry& entry, int64_t begin, int64_t end) {
  return {std::max(entry.offset, begin), std::min(entry.offset + entry.numel, end)};
}

}  // namespace

void DdpRank::shard_after_construct() {
  const int zero = options_.zero_stage;
  check(zero >= 0 && zero <= 3, "the ZeRO stage must be 0 (DDP), 1, 2 or 3, got " + std::to_string(zero),
        ErrorClass::ValueError);
  if (zero == 1) partition_ = zero1_partition(param_extents(model_), world_size());
  if (zero < 2) return;
  flat_layout_ = make_flat_layout(param_extents(model_), world_size());
  const int64_t begin = flat_layout_.shard_begin(rank()), end = begin + flat_layout_.shard_numel();
  shard_param_ = Tensor::zeros({flat_layout_.shard_numel()}, model_.dtype(), device_);  // [L/W], padding 0
  for (const FlatEntry& e : flat_layout_.entries) {
    const Overlap o = overlap(e, begin, end);
    if (o.empty()) continue;
    const Tensor flat = replica_.params.at(e.name).reshape({e.numel});
    shard_param_.slice0(o.lo - begin, o.hi - begin).copy_from(flat.slice0(o.lo - e.offset, o.hi - e.offset));
  }
  device_->backend().synchronize();
  replica_.params = TensorMap{};  // only the shard persists
}

std::vector<CollectiveReport> DdpRank::gather_params() {
  check(options_.zero_stage >= 2, "only FSDP (ZeRO-2/3) gathers its parameters");
  std::vector<CollectiveReport> reports;
  if (full_params_.defined()) return reports;  // SHARD_GRAD_OP keeps them from forward to backward
  full_params_ = Tensor::empty({flat_layout_.padded_numel}, model_.dtype(), device_);  // [L]
  device_->backend().synchronize();
  comm_.run([&] { reports.push_back(group_.all_gather(shard_param_, full_params_)); });
  for (const FlatEntry& e : flat_layout_.entries)
    replica_.params.set(e.name, full_params_.slice0(e.offset, e.offset + e.numel).reshape(e.shape));
  return reports;
}

void DdpRank::free_params() {
  check(options_.zero_stage >= 2, "only FSDP (ZeRO-2/3) frees its parameters");
  replica_.params = TensorMap{};
  full_params_ = Tensor();
}

void DdpRank::start_flat_gradients() {
  // [L] zeros: the padding's gradient stays 0, so its optimizer state does too.
  full_grads_ = Tensor::zeros({flat_layout_.padded_numel}, model_.dtype(), device_);
  for (const FlatEntry& e : flat_layout_.entries)
    replica_.grad_homes.set(e.name, full_grads_.slice0(e.offset, e.offset + e.numel).reshape(e.shape));
}

std::vector<CollectiveReport> DdpRank::reduce_scatter_gradients() {
  check(options_.zero_stage >= 2, "only FSDP (ZeRO-2/3) reduce-scatters its gradients");
  check(full_grads_.defined(), "FSDP: run the backward before the reduce-scatter");
  Backend& be = device_->backend();
  // FSDP's default hook: divide by the pre-divide factor, sum-reduce-scatter, divide by the rest.
  const DivideFactors divide = fsdp_divide_factors(world_size());
  if (divide.pre != 1) be.scale_inplace(full_grads_, 1.0 / divide.pre);
  shard_grad_ = Tensor::empty({flat_layout_.shard_numel()}, model_.dtype(), device_);  // [L/W]
  be.synchronize();
  std::vector<CollectiveReport> reports;
  comm_.run([&] { reports.push_back(group_.reduce_scatter_sum(full_grads_, shard_grad_)); });
  if (divide.post != 1) be.scale_inplace(shard_grad_, 1.0 / divide.post);
  be.synchronize();
  // After the backward only the shards persist: the full gradient, and (both stages) the full parameters.
  replica_.grads = TensorMap{};
  replica_.grad_homes = TensorMap{};
  full_grads_ = Tensor();
  free_params();
  ++iterations_;
  return reports;
}

void DdpRank::step_shards() {
  Backend& be = device_->backend();
  if (options_.zero_stage == 1) {
    // The local optimizer holds only this rank's parameters: state exists for them alone.
    for (const auto& name : partition_.at(static_cast<size_t>(rank())))
      optimizer_.step(name, replica_.params.at(name), replica_.grads.at(name, "the gradients"), be, device_);
  } else {
    check(shard_grad_.defined(), "FSDP: reduce-scatter the gradients before the step");
    optimizer_.step(kFlatParam, shard_param_, shard_grad_, be, device_);
  }
  be.synchronize();
}

std::vector<CollectiveReport> DdpRank::broadcast_params() {
  check(options_.zero_stage == 1, "only ZeroRedundancyOptimizer (ZeRO-1) broadcasts its parameters");
  // _sync_params: for each rank in order, each of its parameters in partition order, from it.
  // They are async_op=True and waited for together: one group of broadcasts.
  std::vector<Tensor*> bufs;
  std::vector<int> roots;
  for (size_t src = 0; src < partition_.size(); ++src)
    for (const auto& name : partition_[src]) {
      bufs.push_back(&replica_.params.at(name));
      roots.push_back(static_cast<int>(src));
    }
  std::vector<CollectiveReport> reports;
  device_->backend().synchronize();
  comm_.run([&] { reports = group_.broadcast_each(bufs, roots); });
  return reports;
}

void DdpRank::add_sharded_result(DdpRankResult& r) const {
  r.zero_stage = options_.zero_stage;
  r.partition = partition_;
  r.flat_layout = flat_layout_;
  if (r.zero_stage == 1) {
    for (const auto& name : partition_.at(static_cast<size_t>(rank())))
      for (const auto& [state_name, t] : optimizer_.state_of(name))
        if (state_name != "step") r.optim.set(name + "/" + state_name, t.to(nullptr));
  }
  if (r.zero_stage >= 2) {
    r.flat_param = shard_param_.to(nullptr);
    if (shard_grad_.defined()) r.flat_grad = shard_grad_.to(nullptr);
    for (const auto& [state_name, t] : optimizer_.state_of(kFlatParam))
      if (state_name != "step") r.flat_state.set(state_name, t.to(nullptr));
  }
}

}  // namespace dpv
