#pragma once
// Each rank's memory under DDP and the three ZeRO stages on the same model, measured by the engine
// (every tensor a rank holds after each stage, counted by kind: engine/ddp/rank_snapshot.h
// list_rank_memory), next to the standard per-parameter formula, and scaled to a model size and
// GPU count a learner picks. What `dpv bench memory` prints and the app's memory view draws.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/observer.h"
#include "engine/run/run_spec.h"
#include "engine/strategy.h"

namespace dpv::course {

// Every rank's bytes by kind after one stage of the measured iteration.
struct MemorySample {
  Stage stage;                         // kind, layer, title
  std::vector<MemoryBreakdown> ranks;  // [W]
};

// One strategy's measured iteration (the second: the optimizer state exists from its start).
struct StrategyMemory {
  StrategyKind strategy = StrategyKind::DistributedDataParallel;
  std::vector<MemorySample> samples;       // after each stage, in plan order
  std::vector<MemoryBreakdown> at_peak;    // [W] each rank's bytes by kind at its largest total
  std::vector<int64_t> peak_total;         // [W]
  std::vector<MemoryBreakdown> persistent; // [W] what stays between iterations (after the last stage)
};

// The standard accounting per rank, in bytes, for Ψ parameters over W ranks, with the engine's dtype
// (float32: 4 bytes of parameter, 4 of gradient, K of optimizer state per parameter: SGD 0, SGD with
// momentum 4, Adam/AdamW 8). Mixed precision's (2 + 2 + K)Ψ with K = 12 is given beside it.
struct MemoryFormula {
  int64_t parameters = 0;          // Ψ
  int world = 1;                   // W
  double param_bytes = 4, grad_bytes = 4, optimizer_bytes = 0;  // per parameter (K = optimizer_bytes)
  double ddp = 0, zero1 = 0, zero2 = 0, zero3 = 0;              // (p+g+K)Ψ, (p+g+K/W)Ψ, (p+(g+K)/W)Ψ, (p+g+K)Ψ/W
  double mixed_ddp = 0, mixed_zero1 = 0, mixed_zero2 = 0, mixed_zero3 = 0;  // the same with 2, 2, 12
  double for_strategy(StrategyKind kind) const;        // ddp .. zero3
};
MemoryFormula memory_formula(int64_t parameters, int world, DType dtype, const OptimizerSettings& optimizer);

// One line per difference between a measured persistent figure and the formula: the padding of the
// flat parameter, buffers (BatchNorm statistics), the optimizer's `step` counters, DDP's buckets.
struct MemoryDifference {
  StrategyKind strategy;
  MemoryKind kind;
  int64_t bytes = 0;        // measured minus formula, for rank 0
  std::string why;          // one sentence, written from the run's numbers
};

struct MemoryComparison {
  RunSpec run;                               // the model, devices (W), batch and optimizer used
  int64_t parameters = 0;                    // Ψ
  int world = 1;
  std::vector<StrategyMemory> strategies;    // DDP, ZeRO-1, ZeRO-2, ZeRO-3 in that order
  MemoryFormula formula;
  std::vector<MemoryDifference> differences;
};

// Runs DDP and ZeRO-1/2/3 from `run` (its strategy is not read) for two iterations each and
// measures the second. dpv::Error for a bad run description.
MemoryComparison compare_memory(const RunSpec& run);

// "What fits": the measured per-parameter costs of each strategy (persistent bytes of rank 0 over Ψ,
// with the activations of the measured batch left out) scaled to `parameters` and `world` GPUs of
// `gpu_bytes` each. A formula, not a run: `is_formula` says so for the page to print.
struct FitEstimate {
  StrategyKind strategy;
  double bytes_per_gpu = 0;   // model state per GPU
  bool fits = false;          // bytes_per_gpu <= gpu_bytes
  bool is_formula = true;
};
std::vector<FitEstimate> what_fits(const MemoryComparison& measured, int64_t parameters, int world, double gpu_bytes);

}  // namespace dpv::course
