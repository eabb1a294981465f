// The training state a checkpoint holds, taken from and put back into each strategy: DataParallel's
// Trainer (device 0), in-process DDP (rank 0's; every rank holds the same parameters and momentum,
// and rank 0's buffers are the ones DDP broadcasts) and a launched DDP rank (its own).
#include "cli/checkpoint.h"

#include "engine/data_parallel.h"
#include "engine/ddp/ddp.h"
#include "engine/ddp/ddp_rank_strategy.h"
#include "engine/error.h"

namespace dpv::cli {
namespace {

// Host copies of the optimizer's state, parameter by parameter in model order.
std::vector<TrainingState::OptimizerEntry> optimizer_state(const ParameterOptimizer& optimizer, const Model& model) {
  std::vector<TrainingState::OptimizerEntry> out;
  for (const TensorDecl& d : model.parameter_decls())
    for (const auto& [state_name, t] : optimizer.state_of(d.name)) out.push_back({d.name, state_name, t.to(nullptr)});
  return out;
}

void restore_optimizer(ParameterOptimizer& optimizer, const TrainingState& state, const std::shared_ptr<Device>& device) {
  for (const auto& e : state.optimizer)
    optimizer.set_state(e.param, e.state, e.state == "step" ? e.value : e.value.to(device));
}

// A DDP rank's state dict in the model's state_dict order (parameters and buffers interleaved).
TensorMap rank_state(const DdpRank& rank) {
  TensorMap out;
  for (const TensorDecl& d : rank.model().state_decls()) {
    const Tensor* t = rank.params().find(d.name);
    if (!t) t = &rank.buffers().at(d.name);
    out.items().emplace_back(d.name, t->to(nullptr));
  }
  return out;
}

// The DDP rank whose state a checkpoint records: rank 0 in process, or this launched rank.
const DdpRank* recorded_rank(const Strategy& strategy) {
  if (const auto* ddp = dynamic_cast<const DdpTrainer*>(&strategy)) return ddp->constructed() ? &ddp->rank(0) : nullptr;
  if (const auto* launched = dynamic_cast<const DdpRankStrategy*>(&strategy))
    return &launched->rank();
  return nullptr;
}

}  // namespace

TrainingState training_state_of(const Strategy& strategy, int64_t step) {
  TrainingState state;
  state.step = step;
  if (const auto* dp = dynamic_cast<const Trainer*>(&strategy)) {
    state.gemm_choices = cpu_gemm_choices();
    state.model = dp->state_to_host();
    state.optimizer = optimizer_state(dp->optimizer(), dp->model());
    return state;
  }
  const DdpRank* rank = recorded_rank(strategy);
  check(rank != nullptr, "no training state to checkpoint before DDP is constructed (an internal error)");
  state.gemm_choices = cpu_gemm_choices();
  state.model = rank_state(*rank);
  state.optimizer = optimizer_state(rank->optimizer(), rank->model());
  state.ddp_bucket_order = rank->reducer().first_ready_order();
  return state;
}

void restore_training_state(Strategy& strategy, const TrainingState& state) {
  set_cpu_gemm_choices(state.gemm_choices);  // before the first step multiplies anything
  if (auto* dp = dynamic_cast<Trainer*>(&strategy)) {
    restore_optimizer(dp->optimizer(), state, dp->devices_ptr()->shared(0));
    return;
  }
  auto restore_rank = [&](DdpRank& rank) {
    restore_optimizer(rank.optimizer(), state, rank.device_ptr());
    if (!state.ddp_bucket_order.empty()) rank.restore_buckets(state.ddp_bucket_order);
  };
  if (auto* ddp = dynamic_cast<DdpTrainer*>(&strategy)) {
    ddp->construct();  // the ranks exist from here on; the first iteration's Construct finds them made
    for (int r = 0; r < ddp->world_size(); ++r) restore_rank(ddp->rank(r));
    return;
  }
  if (auto* launched = dynamic_cast<DdpRankStrategy*>(&strategy)) restore_rank(launched->rank());
}

}  // namespace dpv::cli
