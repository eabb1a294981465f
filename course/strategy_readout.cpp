#include "course/strategy_readout.h"

#include "course/batchnorm_stats.h"
#include "engine/data_parallel.h"
#include "engine/ddp/ddp.h"
#include "engine/error.h"

namespace dpv::course {

StrategyTensors strategy_tensors(Strategy& strategy) {
  if (auto* dp = dynamic_cast<Trainer*>(&strategy)) return {&dp->state(), &dp->state(), &dp->grads()};
  if (auto* ddp = dynamic_cast<DdpTrainer*>(&strategy)) {
    const DdpRank& rank0 = ddp->rank(0);
    return {&rank0.params(), &rank0.buffers(), &rank0.grads()};
  }
  throw Error(std::string("no tensors to read from a ") + strategy_name(strategy.kind()) + " of this kind");
}

double mean_rank_loss(const StrategyIteration& iteration) {
  const std::vector<double> losses = iteration.rank_losses();
  double sum = 0;
  for (double loss : losses) sum += loss;
  return sum / static_cast<double>(losses.size());
}

std::vector<RankOutput> rank_outputs(const Strategy& strategy, const StrategyIteration& iteration) {
  const auto* ddp = dynamic_cast<const DdpTrainer*>(&strategy);
  const auto* ddp_iteration = dynamic_cast<const DdpIteration*>(&iteration);
  if (!ddp || !ddp_iteration) return {{iteration.output(), iteration.output_rows()}};
  std::vector<RankOutput> outputs;
  for (int r = 0; r < ddp->world_size(); ++r)
    outputs.push_back({ddp->rank(r).output(), ddp_iteration->shards().at(static_cast<size_t>(r))});
  return outputs;
}

double accuracy_over_ranks(const std::vector<RankOutput>& outputs, const Tensor& targets) {
  // One [rows, classes] tensor of every rank's logits and the targets of their rows, so the count
  // is course::accuracy's. Float64 holds every logit exactly, whatever the model's dtype.
  const std::vector<int64_t> all_targets = targets.to_int64();
  std::vector<double> logits;
  std::vector<int64_t> labels;
  int64_t classes = 0;
  for (const RankOutput& out : outputs) {
    if (!out.logits.defined() || out.logits.ndim() != 2) return kNoAccuracy;
    classes = out.logits.dim(1);
    const std::vector<double> values = out.logits.to_doubles();
    logits.insert(logits.end(), values.begin(), values.end());
    for (int64_t row : out.rows) labels.push_back(all_targets.at(static_cast<size_t>(row)));
  }
  if (labels.empty()) return kNoAccuracy;
  const auto rows = static_cast<int64_t>(labels.size());
  return accuracy(Tensor::from_doubles({rows, classes}, DType::Float64, logits), Tensor::from_int64({rows}, labels));
}

}  // namespace dpv::course
