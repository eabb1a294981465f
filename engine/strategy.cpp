#include "engine/strategy.h"

#include <cmath>
#include <string>

#include "engine/error.h"

namespace dpv {

double StrategyIteration::mean_rank_loss() const {
  const std::vector<double> losses = rank_losses();
  double sum = 0;
  for (double loss : losses) sum += loss;  // rank order: the same sum on every run
  return sum / static_cast<double>(losses.size());
}

void check_learning_rate(double lr) {
  check(std::isfinite(lr) && lr >= 0, "Invalid learning rate: " + std::to_string(lr), ErrorClass::ValueError);
}

}  // namespace dpv
