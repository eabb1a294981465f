#pragma once
// One device, DataParallel and DistributedDataParallel trained side by side on the same model,
// seed and global batches: what the app's "DP vs DDP" page shows, measured by the engine. Per
// iteration the loss, the largest parameter difference against one device and where the step's time
// went; per device the peak memory; the bytes each kind of transfer moved in one step; one gradient
// element showing sum (DataParallel) against mean (DDP); and the speed-up over 1..8 devices.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/observer.h"
#include "engine/run/run_spec.h"
#include "engine/tensor_map.h"

namespace dpv::course {

// What the comparison shares with a training run, as a run description: the model (mlp-bn), the
// devices of DataParallel and DDP ("cpu:4": 4 devices, 4 ranks), the GLOBAL batch (64: DP scatters
// it, DDP's sampler shards it), SGD's settings (lr 0.05) and the seed. Its strategy is not read: the
// comparison runs one device, DataParallel and DDP from it.
RunSpec compare_run_defaults();

struct CompareConfig {
  RunSpec run = compare_run_defaults();
  int iterations = 20;
  int max_speedup_devices = 8;  // the speed-up sweep covers 1..this (0: no sweep)
  int speedup_iters = 3;        // timed iterations per point (the best counts)
};

// The devices in config.run.devices: DataParallel's devices, DDP's ranks (dpv::Error for a bad spec).
int compare_world_size(const CompareConfig& config);

// Where one iteration's time went (seconds). DataParallel: compute = Forward, Loss, Backward,
// Step; communication = Scatter, Gather, Grad scatter, ReduceGrads; replicate = Replicate (every
// iteration). DDP: compute = Sample, Forward, Loss, Backward (its all-reduces overlap it), Step;
// communication = BroadcastBuffers and Finalize (the all-reduce time the backward did not hide);
// replicate = Construct (the first iteration only).
struct StepParts {
  double compute = 0;
  double communication = 0;
  double replicate = 0;
  double total = 0;       // the whole iteration, wall clock
  double overlapped = 0;  // DDP: the bucket all-reduces' own time on rank 0, much of it hidden by the backward
};

struct BytesMoved {
  std::string what;  // "scatter inputs", "reduce grads to GPU 0", "all-reduce grads" (short: chart rows)
  double bytes = 0;  // sent between devices in one iteration, all devices together
};

struct ModeRun {
  std::string name;                     // "one device", "DataParallel", "DDP"
  std::vector<double> loss;             // per iteration (DDP: the mean of the ranks' losses)
  std::vector<double> rank0_loss;       // DDP only: what rank 0 alone would print
  std::vector<double> max_param_diff;   // per iteration: max |param - one device's| (one device: 0)
  std::vector<StepParts> parts;         // per iteration
  StepParts steady;                     // the mean over the iterations after the first (DDP builds
                                        // itself in the first; one iteration: that one)
  std::vector<std::string> device_labels;
  std::vector<int64_t> peak_memory;     // per device: the engine's peak allocation over the run
  // Per device, by kind (DataParallel and DDP only): what the device held at the stage boundary
  // where it held the most, in a steady iteration (the second, after DDP's bucket rebuild) run
  // from the same start with stage snapshots (engine/observer.h MemoryBreakdown: parameters,
  // gradients, activations, optimizer state, gathered output, batch, DDP buckets; `other` is 0: a
  // collective's scratch caught in flight depends on thread timing). `peak_stage` names that stage;
  // `stage_temporaries` is that run's peak counter minus those parts: what lived only inside a
  // stage (workspaces, a collective's scratch).
  std::vector<MemoryBreakdown> peak_parts;
  std::vector<std::string> peak_stage;
  std::vector<int64_t> stage_temporaries;
  std::vector<BytesMoved> bytes;        // the last iteration's transfers
  std::vector<int64_t> rows;            // rows per device (DP: torch.chunk; DDP: sampler shard)
};

// One gradient element after one iteration from the same start: the first element of `param`.
struct SumVsMean {
  std::string param;
  double one_device = 0;              // gradient of the whole-batch mean loss
  std::vector<double> dp_replicas;    // each replica's gradient of the whole-batch mean loss (its chunk only)
  double dp_reduced = 0;              // device 0 after ReduceGrads: the SUM of the replicas'
  std::vector<double> ddp_bucket;     // each rank's gradient of its own shard's mean loss, divided by world
                                      // (what DDP puts into the bucket before the all-reduce)
  double ddp_reduced = 0;             // every rank after the all-reduce: the MEAN of the ranks' gradients
};

struct SpeedupPoint {
  int devices = 1;
  double one_device_s = 0;  // seconds per step on one device
  double dp_s = 0;
  double ddp_s = 0;
  double dp_speedup = 0;    // one_device_s / dp_s
  double ddp_speedup = 0;
  // The machine's own limit on `devices` workers (course/machine_reference.h: that many independent
  // single-threaded GEMM workers against one, measured beside the sweep), and each strategy's
  // parallel efficiency against it (speed-up / machine_speedup). 0 on one device.
  double machine_speedup = 0;
  double dp_efficiency = 0;
  double ddp_efficiency = 0;
  unsigned free_cores = 0;  // CPUs the engine found free for its threads while it timed this point
};

struct CompareResult {
  CompareConfig config;
  ModeRun one, dp, ddp;
  bool has_batchnorm = false;  // per-device BatchNorm statistics: DP and DDP differ from one device
  int64_t ddp_padding = 0;     // samples DistributedSampler repeated to even out the shards
  SumVsMean sum_mean;
  std::vector<SpeedupPoint> speedup;
  unsigned hardware_threads = 0;  // std::thread::hardware_concurrency()
  // The fewest CPUs the engine found free for its threads during the timed runs (engine/free_cores.h:
  // other programs' work takes the rest); hardware_threads on a quiet machine.
  unsigned free_cores = 0;
  // The data: iteration i trains on a NEW batch drawn with seed first_batch_seed + i
  // (make_data_for_model), the same one for the three modes. Each loss is that batch's, so it moves
  // from batch to batch (one device's lowest and highest below) even while training goes well.
  uint64_t first_batch_seed = 0;
  int batches = 0;
  std::vector<int64_t> batch_sizes;  // per iteration: the global batch it trained on
  double loss_low = 0, loss_high = 0;
  bool simulated = false;  // the devices are CPU threads standing in for GPUs
  int most_devices = 0;    // the most devices any timed run used (the run's, or the sweep's last)
  // Simulated devices outnumber the free cores: the times are threads taking turns on shared cores,
  // not GPUs each computing on its own, and no speed-up can show beyond the free cores.
  unsigned cores_for_devices() const { return free_cores > 0 ? free_cores : hardware_threads; }
  bool threads_share_cores() const {
    return simulated && cores_for_devices() > 0 && static_cast<unsigned>(most_devices) > cores_for_devices();
  }
  // Other programs took some of the machine's cores while it measured.
  bool cores_taken() const { return free_cores > 0 && free_cores < hardware_threads; }
  // DDP's steady step took longer than DataParallel's on this machine.
  bool ddp_slower() const { return ddp.steady.total > dp.steady.total && dp.steady.total > 0; }
};

// Progress: (what is running, fraction done 0..1). Return false from `keep_going` to stop early
// (the result then holds what finished). `live_batch`, when given, is read before each iteration:
// a global batch changed while the comparison trains is used from the next iteration on, without a
// restart (a value below one sample per device is ignored). Throws dpv::Error on bad settings.
CompareResult run_comparison(const CompareConfig& config,
                             const std::function<void(const std::string&, double)>& progress = {},
                             const std::function<bool()>& keep_going = {},
                             const std::atomic<int64_t>* live_batch = nullptr);

}  // namespace dpv::course
