#pragma once
// `dpv train --checkpoint DIR`: the training state written every --checkpoint-every steps (and
// after the last) as DIR/checkpoint-<step>.safetensors, and read back when a run starts with DIR
// holding checkpoints, so the rest of the run computes exactly what the uninterrupted run would.
//
// One file is a safetensors file PyTorch reads (safetensors.torch.load_file):
//   <state dict name>                  the model's parameters and buffers ("0.weight", "1.running_mean")
//   optim/<param>/<state>              the optimizer's state under torch.optim's names: SGD's
//                                      momentum_buffer (absent with momentum 0); Adam's and AdamW's
//                                      step (float32, shape []), exp_avg and exp_avg_sq
//   __metadata__                       the run's facts (CheckpointFacts), the step, the next batch's
//                                      position, the optimizer's settings, DDP's bucket order and the
//                                      CPU backend's GEMM library per product shape (gemm_choices)
// Nothing else decides the rest of the run: the data set is made from the seed, batches are taken in
// order (the next one follows from the step) and DDP's sampler does not shuffle.
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "engine/core_backends.h"
#include "engine/datasets.h"
#include "engine/run/run_spec.h"
#include "engine/strategy.h"
#include "engine/tensor_map.h"

namespace dpv::cli {

// Every 10 steps: a write costs about one step's parameter traffic, and a kill loses at most 10.
inline constexpr int64_t kDefaultCheckpointEvery = 10;
// Checkpoints kept: the newest and the one before it (a kill during a write leaves the older one).
inline constexpr int kCheckpointsKept = 2;

struct CheckpointOptions {
  std::string dir;  // empty: no checkpoints
  int64_t every = kDefaultCheckpointEvery;
};

// What a checkpoint must agree on with the run that resumes from it, each with the flag that sets it.
struct CheckpointFacts {
  std::string model_hash;  // 16 hex digits of FNV-1a over the model spec's JSON
  std::string devices;     // the device spec
  int world_size = 1;      // devices (DataParallel) or ranks (DDP)
  std::string strategy;    // "DataParallel", "DistributedDataParallel"
  std::string optimizer;   // "sgd", "adam", "adamw": another optimizer's state cannot continue the run
  uint64_t seed = 0;
  int64_t batch = 0;       // the global batch
  std::string data;        // "<data set name>, <N> samples"
};
CheckpointFacts checkpoint_facts(const RunSpec& run, const std::string& devices, int world_size, const Dataset& data);

// The training state after `step` steps, host tensors.
struct TrainingState {
  int64_t step = 0;
  TensorMap model;     // the state dict
  // The optimizer's state tensors (engine/optim), each under its parameter and torch.optim's name.
  struct OptimizerEntry {
    std::string param, state;
    Tensor value;
  };
  std::vector<OptimizerEntry> optimizer;
  // DDP: the parameter indices in the order their gradients became ready in the first backward,
  // from which DDP rebuilt its buckets (empty for DataParallel). Restored, the resumed ranks use the
  // rebuilt buckets from their first iteration on, as the uninterrupted run does; a freshly built
  // PyTorch DDP would all-reduce one iteration in its initial buckets first, which with 3 or more
  // ranks sums some elements in another order.
  std::vector<size_t> ddp_bucket_order;
  // The CPU backend's float32 GEMM library per product shape, timed by the run (rank 0's in a
  // launched job). Restored, the resumed run multiplies every shape the interrupted one had met with
  // the same library, whatever its own timing would say: the same numbers, bit for bit. Empty in
  // checkpoints written before it was recorded (such a run times its shapes again).
  std::vector<CpuGemmChoice> gemm_choices;
};

// The state `strategy` holds now (DataParallel's on device 0, DDP's rank 0's or this launched rank's).
TrainingState training_state_of(const Strategy& strategy, int64_t step);
// Restores the optimizer's state, DDP's buckets and the GEMM choices into a strategy made from the
// checkpoint's state dict.
void restore_training_state(Strategy& strategy, const TrainingState& state);

// DIR/checkpoint-000040.safetensors: the step zero-padded to 6 digits, so names sort by step.
std::string checkpoint_path(const std::string& dir, int64_t step);

// The file's bytes and metadata for `state` of a run with `facts`; `run` adds the optimizer's settings.
std::string serialize_checkpoint(const TrainingState& state, const CheckpointFacts& facts, const RunSpec& run,
                                 int64_t data_position);
// Reads a checkpoint's bytes (`source` names it in messages). Throws dpv::Error when the file is no
// complete checkpoint, and, with a clear fix, when it is from a run whose facts differ.
TrainingState parse_checkpoint(const std::string& bytes, const std::string& source, const CheckpointFacts& facts);

// A checkpoint found in DIR: its path and bytes.
struct FoundCheckpoint {
  std::string path, bytes;
};

// The checkpoints of one run in one folder.
class CheckpointFolder {
 public:
  explicit CheckpointFolder(CheckpointOptions options);
  bool enabled() const { return !options_.dir.empty(); }
  // Creates the folder if needed and removes temporary files a killed writer left (write_file_atomic's,
  // whose process is gone). Throws dpv::Error naming --checkpoint when DIR cannot be a folder.
  void prepare() const;
  // The newest checkpoint that reads as a complete safetensors file with checkpoint metadata; each
  // newer one that does not is skipped with a one-line warning on `warn` (and left in place).
  std::optional<FoundCheckpoint> newest_complete(std::ostream& warn) const;
  // Whether `steps_done` (of `total`) gets a checkpoint: every options.every steps and the last.
  bool due(int64_t steps_done, int64_t total) const;
  // Writes the checkpoint atomically, then deletes all but the newest kCheckpointsKept of those at
  // or before its step (newer ones, skipped as incomplete, are left for the run to overwrite).
  void save(const std::string& bytes, int64_t step) const;

 private:
  CheckpointOptions options_;
};

// The checkpoints of one `dpv train` run: where it resumes from, and a write after each step due.
class TrainCheckpoints {
 public:
  // `samples`: the data set's size (the next batch's position is recorded with each checkpoint).
  TrainCheckpoints(CheckpointOptions options, CheckpointFacts facts, RunSpec run, int64_t steps, int64_t samples);
  bool enabled() const { return folder_.enabled(); }
  // Prepares the folder and finds the newest complete checkpoint (warnings on stderr). In a launched
  // job only rank 0 calls it; the others get its bytes through the group.
  std::optional<FoundCheckpoint> find() const;
  // The state to resume from `found` (checked against this run), announced on stdout when `announce`.
  std::optional<TrainingState> resume(const std::optional<FoundCheckpoint>& found, bool announce) const;
  // Writes the checkpoint of `steps_done` when one is due.
  void after_step(const Strategy& strategy, int64_t steps_done) const;

 private:
  CheckpointFolder folder_;
  CheckpointFacts facts_;
  RunSpec run_;
  int64_t steps_ = 0, samples_ = 0;
};

}  // namespace dpv::cli
