#pragma once
// Seconds per training step, measured one way for every caller that compares one device,
// DataParallel and DDP (`dpv bench`, the app's DP-vs-DDP page): untimed warm-up steps, then timed
// rounds of steps, and the best round's mean counts, since on a shared machine noise only ever
// adds time (bench/pytorch_step.py measures PyTorch the same way).
#include <functional>

#include "engine/data_parallel.h"
#include "engine/ddp/ddp.h"

namespace dpv {

struct StepTiming {
  int warmup = 1;     // untimed steps first (DDP runs at least 2: construction, then the bucket rebuild)
  int rounds = 3;     // timed rounds
  int per_round = 1;  // steps per round
  // Runs untimed before each round (a reference measurement that should see the same load).
  std::function<void()> between_rounds;
};

// The best round's seconds per step of `step`, after `timing.warmup` calls.
double best_seconds_per_step(const std::function<void()>& step, const StepTiming& timing);
// One DataParallel (or one-device) iteration of `trainer` on the batch per step.
double time_dp_steps(Trainer& trainer, const Tensor& input, const Tensor& target, const StepTiming& timing);
// One DDP iteration of `trainer` on the GLOBAL batch per step.
double time_ddp_steps(DdpTrainer& trainer, const Tensor& input, const Tensor& target, StepTiming timing);

}  // namespace dpv
