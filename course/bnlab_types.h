#pragma once
// Plain value types of the BatchNorm lab (course/bnlab_session.h). They hold values only (no
// tensors, no pointers into the engine), so the app's lab worker can send them from its thread to
// the GUI thread as they are.
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/observer.h"

namespace dpv::course {

// The models the lab trains from the same initial state on the same global batches.
enum BnLabModel : int {
  BnLabPerDevice = 0,  // nn.DataParallel with plain BatchNorm: each replica normalises its own chunk
  BnLabSync = 1,       // the same with SyncBatchNorm's merge (what DDP + SyncBatchNorm computes)
  BnLabReference = 2,  // one device, the whole batch: what the others should agree with
  BnLabDdpPerRank = 3, // DistributedDataParallel with plain BatchNorm: each rank normalises its own shard
  BnLabDdpSync = 4,    // DistributedDataParallel with SyncBatchNorm: statistics all-gathered over the ranks
};
constexpr int kBnLabModelCount = 5;
// The DataParallel models and the reference (dpv::Trainer), and the DDP models (dpv::DdpTrainer).
constexpr int kBnLabDpModelCount = 3;
inline bool bnlab_is_ddp(BnLabModel m) { return m == BnLabDdpPerRank || m == BnLabDdpSync; }

// Display names of the models ("per-device BatchNorm", "SyncBatchNorm", "single-device reference",
// "per-rank BatchNorm (DDP)", "SyncBatchNorm (DDP)").
const char* bnlab_model_name(BnLabModel which);

struct BnLabConfig {
  std::string devices = "cpu:4";  // device spec of the DataParallel and DDP models (one rank per device)
  int64_t batchSize = 32;
  double learningRate = 0.05;
  double sgdMomentum = 0.0;       // torch.optim.SGD(momentum=...)
  double bnMomentum = 0.1;        // nn.BatchNorm1d(momentum=...): weight of the new batch statistic
  bool classSorted = true;        // batches sorted by class, so each device's chunk sees other classes
  uint64_t seed = 0;
  int64_t datasetSize = 2048;     // points of the built-in spiral
};

// Statistics of one BatchNorm layer in one model for one training step.
struct BnLabLayerStats {
  int layer = -1;                            // index in the model ("1" for "1.running_mean")
  // One per device that held a replica (DDP: one per rank, its DistributedSampler shard), device order.
  std::vector<dpv::BatchNormStats> chunks;
  // The whole batch: the engine's synchronised statistics (SyncBN model), the pooled statistics of
  // this model's own chunks (per-device model: what SyncBN would have used), or the single
  // device's statistics (reference).
  dpv::BatchNormStats whole;
  std::vector<double> runningMean, runningVar;  // [C] after this step's update (DDP: rank 0's, the ones saved)
  // Per-device model only: running statistics rebuilt from device 0's chunk alone, with the
  // BatchNorm update rule; they coincide with runningMean/runningVar because only replica 0's
  // buffers survive a DataParallel forward.
  std::vector<double> device0EmaMean, device0EmaVar;  // [C]
};

struct BnLabModelStep {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  double loss = kNaN;       // cross-entropy (mean over the batch; DDP: mean of the ranks' losses), before the update
  double accuracy = kNaN;   // fraction of the batch classified right (DDP: of the ranks' shards), before the update
  double paramDistance = kNaN;  // max |param - reference param| after the update (NaN for the reference)
  double gradDistance = kNaN;   // max |grad - reference grad| of this step (NaN for the reference)
  std::vector<BnLabLayerStats> layers;  // one per BatchNorm layer, model order
  bool stopped = false;     // the model stopped at an engine error (this step or earlier): no values
};

struct BnLabStep {
  int64_t step = 0;              // steps taken so far, this one included (1-based)
  std::vector<int64_t> chunks;   // rows per device with a replica (DataParallel's scatter)
  std::vector<int64_t> shards;   // rows per DDP rank (DistributedSampler, padded)
  // Samples DistributedSampler repeated so every rank gets an equal shard (the shards' total minus
  // the batch: a batch of 10 on 4 ranks is padded to 12). The DDP models' statistics, losses and
  // gradients then count those samples twice, so even DDP's SyncBatchNorm is not the reference.
  int64_t ddpPadding = 0;
  int64_t batchRows = 0;         // the global batch of this step
  std::array<BnLabModelStep, kBnLabModelCount> models;
};

}  // namespace dpv::course
