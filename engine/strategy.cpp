#include "engine/strategy.h"

namespace dpv {

double StrategyIteration::mean_rank_loss() const {
  const std::vector<double> losses = rank_losses();
  double sum = 0;
  for (double loss : losses) sum += loss;  // rank order: the same sum on every run
  return sum / static_cast<double>(losses.size());
}

}  // namespace dpv
