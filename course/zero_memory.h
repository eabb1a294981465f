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
#include "engine/zero/flat_layout.h"

namespace dpv::course {

// Every rank's bytes by kind after one stage of the measured iteration.
struct MemorySample {
  Stage stage;                         // kind, layer, title
  std::vector<MemoryBreakdown> ranks;  // [W]
};

// One strategy's measured iteration (the second: the optimizer state exists from its start).
// Measured at stage boundaries: what lives only inside a stage (a layer's workspace) is not seen.
// The peak is chosen by the listed tensors (`other` left out): what a collective's scratch holds
// when a stage ends depends on thread timing, the listed tensors do not.
struct StrategyMemory {
  StrategyKind strategy = StrategyKind::DistributedDataParallel;
  std::vector<MemorySample> samples;       // after each stage, in plan order
  std::vector<MemoryBreakdown> at_peak;    // [W] each rank's bytes by kind at its largest total
  std::vector<int64_t> peak_total;         // [W] at_peak[r].total()
  std::vector<int> peak_sample;            // [W] which sample at_peak[r] is
  std::vector<MemoryBreakdown> persistent; // [W] what stays between iterations (after the last stage)
};

// The model state of a breakdown: parameters (and buffers), gradients, optimizer state, DDP's
// buckets and FSDP's gathered parameter; not the batch, activations, output or `other`.
int64_t model_state_bytes(const MemoryBreakdown& m);

// The formula's bytes per rank of one strategy, by kind.
struct FormulaParts {
  double parameters = 0, gradients = 0, optimizer = 0;
  double total() const { return parameters + gradients + optimizer; }
};

// The standard accounting per rank, in bytes, for Ψ parameters over W ranks, with the engine's dtype
// (float32: 4 bytes of parameter, 4 of gradient, K of optimizer state per parameter: SGD 0, SGD with
// momentum 4, Adam/AdamW 8; Adam's `step` lives on the host, as in PyTorch 1.13). Mixed precision's
// (2 + 2 + K)Ψ is given beside it, K = a float32 master copy plus float32 state: Adam 12, SGD with
// momentum 8, SGD 4.
struct MemoryFormula {
  int64_t parameters = 0;          // Ψ
  int world = 1;                   // W
  double param_bytes = 4, grad_bytes = 4, optimizer_bytes = 0;  // per parameter (K = optimizer_bytes)
  double mixed_optimizer_bytes = 4;                             // mixed precision's K
  double ddp = 0, zero1 = 0, zero2 = 0, zero3 = 0;              // (p+g+K)Ψ, (p+g+K/W)Ψ, (p+(g+K)/W)Ψ, (p+g+K)Ψ/W
  double mixed_ddp = 0, mixed_zero1 = 0, mixed_zero2 = 0, mixed_zero3 = 0;  // the same with 2, 2, K_mixed
  double for_strategy(StrategyKind kind) const;        // ddp .. zero3
  double mixed_for_strategy(StrategyKind kind) const;  // mixed_ddp .. mixed_zero3
  FormulaParts parts(StrategyKind kind) const;         // for_strategy(kind) by kind
};
MemoryFormula memory_formula(int64_t parameters, int world, DType dtype, const OptimizerSettings& optimizer);

// One line per difference between a measured figure of rank 0 (between iterations, or at its
// peak) and the formula: the padding of the flat parameter, buffers (BatchNorm statistics), the
// optimizer's `step` counters, DDP's buckets, the gathered parameter, the batch and activations.
// The lines of one strategy and point add up to measured total minus formula total.
struct MemoryDifference {
  StrategyKind strategy;
  MemoryKind kind;
  int64_t bytes = 0;        // measured minus formula, for rank 0
  std::string why;          // one sentence, written from the run's numbers
  bool at_peak = false;     // false: between iterations (StrategyMemory::persistent)
  bool other = false;       // counted in MemoryBreakdown::other (`kind` is then not the part)
  bool explained = true;    // false: what is left once the known causes are taken away
};

struct MemoryComparison {
  RunSpec run;                               // the model, devices (W), batch and optimizer used
  int64_t parameters = 0;                    // Ψ
  int world = 1;
  std::vector<StrategyMemory> strategies;    // DDP, ZeRO-1, ZeRO-2, ZeRO-3 in that order
  MemoryFormula formula;
  std::vector<MemoryDifference> differences;
  int64_t batch = 0;                         // the global batch measured
  int64_t buffer_bytes = 0;                  // buffers (BatchNorm statistics): whole on every rank
  FlatLayout flat;                           // ZeRO-2/3's flat parameter (L = flat.padded_numel)
  ZeroPartition partition;                   // ZeRO-1's parameters per rank
  const StrategyMemory& of(StrategyKind kind) const;  // dpv::Error when not measured
};

// Rank 0's difference lines of every measured strategy, between iterations and at its peak
// (zero_memory_differences.cpp): what compare_memory puts in `differences`.
std::vector<MemoryDifference> explain_differences(const MemoryComparison& c);
// The same lines for rank 0 after stage `sample` of `kind`'s measured iteration (at_peak false):
// what the app shows beside a stage's bars. dpv::Error for a sample or strategy not measured.
std::vector<MemoryDifference> explain_stage(const MemoryComparison& c, StrategyKind kind, int sample);

// Runs DDP and ZeRO-1/2/3 from `run` (its strategy is not read) for two iterations each and
// measures the second. dpv::Error for a bad run description.
MemoryComparison compare_memory(const RunSpec& run);

// "What fits": the measured model state per parameter (buffers, the batch and activations left
// out), split as the strategy holds it: whole on every rank (rank 0's; DDP: all of it; ZeRO-1:
// parameters, gradients, buckets), sharded (ZeRO-1: optimizer state; ZeRO-2/3: the parameter,
// gradient and state slices; every rank's share added up, then spread evenly over `world`), and
// what the iteration adds at rank 0's largest model state (FSDP's gathered parameter and full flat
// gradient, whole), scaled to `parameters` over `world` GPUs of `gpu_bytes` each. A formula, not
// a run: `is_formula` says so for the page to print.
struct FitEstimate {
  StrategyKind strategy;
  double bytes_per_gpu = 0;   // model state per GPU at the peak
  // Of it: what stays between iterations, and what only the peak adds (FSDP's gathered full flat
  // parameter and gradient: the whole model here, one FSDP unit; one layer at a time when every layer
  // is a unit of its own).
  double persistent_bytes_per_gpu = 0;
  double transient_bytes_per_gpu = 0;
  bool fits = false;          // bytes_per_gpu <= gpu_bytes
  bool is_formula = true;
};
std::vector<FitEstimate> what_fits(const MemoryComparison& measured, int64_t parameters, int world, double gpu_bytes);

}  // namespace dpv::course
