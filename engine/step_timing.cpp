// Seconds per training step (see step_timing.h).
#include "engine/step_timing.h"

#include <algorithm>
#include <chrono>

#include "engine/error.h"

namespace dpv {

double best_seconds_per_step(const std::function<void()>& step, const StepTiming& timing) {
  check(timing.rounds >= 1 && timing.per_round >= 1 && timing.warmup >= 0,
        "step timing needs at least one round of at least one step", ErrorClass::ValueError);
  for (int i = 0; i < timing.warmup; ++i) step();
  double best = 1e30;
  for (int round = 0; round < timing.rounds; ++round) {
    if (timing.between_rounds) timing.between_rounds();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < timing.per_round; ++i) step();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / timing.per_round;
    best = std::min(best, s);
  }
  return best;
}

double time_dp_steps(Trainer& trainer, const Tensor& input, const Tensor& target, const StepTiming& timing) {
  return best_seconds_per_step([&] { Iteration(trainer, input, target).run_to_end(); }, timing);
}

double time_ddp_steps(DdpTrainer& trainer, const Tensor& input, const Tensor& target, StepTiming timing) {
  timing.warmup = std::max(timing.warmup, 2);  // construction, then the one bucket rebuild
  return best_seconds_per_step([&] { DdpIteration(trainer, input, target).run_to_end(); }, timing);
}

}  // namespace dpv
