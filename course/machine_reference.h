#pragma once
// The machine's own limit for data parallelism on CPU devices: how much faster K independent
// single-threaded workers get through the same GEMM work than one worker alone, on this machine,
// now (its cores, their shared caches and memory bandwidth, and whatever else is running). A
// strategy's speed-up on cpu:K divided by this is its parallel efficiency: 1.0 means it loses
// nothing to hand-offs, waiting or the driving thread, whatever the machine allows.
#include <vector>

#include "course/gemm_reference.h"

namespace dpv::course {

struct MachineReference {
  int workers = 1;
  double one_worker_passes_per_s = 0;  // one worker alone
  double all_workers_passes_per_s = 0; // `workers` workers at once, their passes added up
  double speedup() const { return one_worker_passes_per_s > 0 ? all_workers_passes_per_s / one_worker_passes_per_s : 0; }
};

// Runs GEMM passes over `shapes` (float32, the engine CPU backend's own GEMM, one thread per
// worker, each on operands of its own) for about `seconds` with one worker, then with `workers`
// workers at once, alternating `rounds` times; the best of each counts.
MachineReference measure_machine_reference(int workers, const std::vector<GemmShape>& shapes, double seconds, int rounds = 2);

// The shapes the reference runs: one training step of the large MLP (784-1024-1024-10, batch 256),
// GEMMs big enough that the result speaks of the cores, not of call overheads.
std::vector<GemmShape> machine_reference_shapes();

}  // namespace dpv::course
