#pragma once
// nn.DataParallel, one iteration as an explicit plan of stages. Running the plan straight through
// and stepping it one stage at a time use the same code (Iteration::step).
//
// Semantics (what PyTorch 1.13 does, read from torch/nn/parallel/*.py):
//  - Scatter: torch.chunk sizes, ceil(N/k) rows per chunk, so fewer replicas when the batch is
//    small; chunk 0 is a view when the batch is already on device 0.
//  - Replicate: parameters and buffers broadcast to devices 1..r-1; replica 0 *is* the original.
//  - Forward per layer on all replicas in parallel; Gather on device 0; Loss on device 0.
//  - Backward: Gather's backward scatters the output gradient with the forward sizes, then each
//    replica runs backward layer by layer; ReduceGrads sums (left fold) onto device 0; Step runs
//    the optimizer once on device 0.
//  - One device: no replicate, no gather, no reduce (the module is called directly). Several
//    devices but a batch that yields one chunk still take DataParallel's path with one replica.
//  - sync_bn: the didactic extension: BatchNorm layers compute what DDP + SyncBatchNorm computes.
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "engine/collectives.h"
#include "engine/device.h"
#include "engine/model.h"
#include "engine/observer.h"
#include "engine/optim/optimizer.h"
#include "engine/strategy.h"
#include "engine/tensor_map.h"

namespace dpv {

// torch.chunk(N, k) sizes along dim 0: ceil(N/k) each, the last holding the rest; N == 0 gives k zeros.
std::vector<int64_t> chunk_sizes(int64_t n, int k);

struct TrainOptions {
  OptimizerSettings optimizer;  // torch.optim.SGD, Adam or AdamW over the module on device 0
  bool sync_bn = false;
};

// The original module on device 0 plus the optimizer: what persists between iterations.
class Trainer : public Strategy {
 public:
  // `state` is a host (or any-device) state dict; it is checked against the model and copied to device 0.
  Trainer(std::shared_ptr<DeviceSet> devices, Model model, const TensorMap& state, TrainOptions options);
  ~Trainer() override;
  StrategyKind kind() const override { return StrategyKind::DataParallel; }
  const Model& model() const override { return model_; }
  Model& model() { return model_; }
  DeviceSet& devices() const override { return *devices_; }
  std::string transport() const override;
  StrategyTensors tensors() const override { return {&state_, &state_, &grads_}; }
  // An Iteration (below) on this trainer.
  std::unique_ptr<StrategyIteration> begin_iteration(const Tensor& input, const Tensor& target,
                                                     Observer* observer = nullptr) override;
  void set_learning_rate(double lr) override;
  std::shared_ptr<DeviceSet> devices_ptr() const { return devices_; }
  Collectives& collectives() const { return *collectives_; }
  TrainOptions& options() { return options_; }
  const TrainOptions& options() const { return options_; }
  TensorMap& state() { return state_; }        // params + buffers on device 0
  TensorMap& grads() { return grads_; }        // .grad on device 0 after ReduceGrads
  // torch.optim's state of the module's parameters, on device 0 (momentum buffers; Adam's moments).
  ParameterOptimizer& optimizer() { return optimizer_; }
  const ParameterOptimizer& optimizer() const { return optimizer_; }
  int64_t steps_taken() const { return steps_; }
  void count_step() { ++steps_; }
  TensorMap state_to_host() const;             // a host copy of the state dict
  // The stages of an iteration over `replicas` chunks, with their titles: built on first use and
  // kept, so a training loop does not rebuild the same texts every step.
  const std::vector<Stage>& plan(int replicas);
  // Model::check_input, skipped for an input of the shape and dtype the last step passed with.
  void check_input(const Tensor& input);

 private:
  std::shared_ptr<DeviceSet> devices_;
  Model model_;
  TrainOptions options_;
  std::unique_ptr<Collectives> collectives_;
  TensorMap state_;
  TensorMap grads_;
  ParameterOptimizer optimizer_;
  int64_t steps_ = 0;
  std::map<int, std::vector<Stage>> plans_;  // by number of replicas
  Shape checked_input_shape_;                // the last input that passed check_input
  DType checked_input_dtype_ = DType::Float32;
};

class Iteration : public StrategyIteration {
 public:
  // input [N, ...] and target [N] (int64) as host tensors. Checks the batch (dtype, shape, empty)
  // and builds the plan; throws dpv::Error with PyTorch's wording on bad input.
  Iteration(Trainer& trainer, const Tensor& input, const Tensor& target, Observer* observer = nullptr);
  ~Iteration() override;
  StrategyKind strategy() const override { return StrategyKind::DataParallel; }
  const std::vector<Stage>& plan() const override { return *plan_; }
  int next_index() const override { return next_; }
  // Runs the next stage and returns its event (also passed to the observer). Errors inside a
  // replica are re-raised like parallel_apply does: "Caught ValueError in replica 3 on device 3. ..."
  StageEvent step() override;
  // Runs the remaining stages. Without an observer nobody sees their events, so they carry no
  // texts (title, summary) and no chunk sizes: a training loop builds no strings per step.
  void run_to_end() override;
  // Whether stages build value snapshots (StageEvent::devices, batchnorm, loss). On when the
  // observer wants them; a caller that draws the events step() returns turns it on itself.
  // Off, an iteration copies nothing from the devices to the host between stages.
  bool snapshots() const override { return snapshots_; }
  void set_snapshots(bool on) override { snapshots_ = on; }

  // What every device holds now, as a stage's snapshot lists it; before the first stage: the
  // batch and the module on device 0 (the app draws it before anything has run).
  std::vector<DeviceState> devices_now() const;

  const std::vector<int64_t>& chunks() const { return chunks_; }
  int replicas() const { return static_cast<int>(chunks_.size()); }
  Tensor output() const override { return output_; }  // gathered output on device 0 (after Gather)
  std::vector<int64_t> output_rows() const override;    // every row of the batch, in order
  // The loss after the Loss stage (0 before it); read from device 0 on the first call, as
  // loss.item() is: a run that never asks never copies it to the host.
  double loss() const override;
  std::vector<double> rank_losses() const override { return {loss()}; }
  // BatchNorm statistics of the last forward: per device, and global under sync_bn. The devices
  // keep them as tensors; they are read on the host when asked for (or for a snapshot).
  const std::vector<BatchNormStats>& batchnorm_stats() const override;

 private:
  struct Impl;
  friend struct Impl;
  // step(); `describe`: fill the event's title, chunk sizes and summary (someone will read them).
  StageEvent run_stage(bool describe);
  // One entry of batchnorm_stats() as the devices hold it. The global statistics of SyncBatchNorm
  // keep invstd (what the merge produces); the variance is rebuilt from it when read.
  struct DeviceStats {
    int layer = -1;
    int device = -1;
    Tensor mean;    // [C]
    Tensor var_b;   // [C] biased variance, or undefined: use invstd
    Tensor invstd;  // [C]
    double eps = 0;
    double count = 0;
  };
  Trainer& trainer_;
  Observer* observer_;
  bool snapshots_ = false;  // the observer wants value snapshots
  const std::vector<Stage>* plan_ = nullptr;  // the trainer's, for this number of replicas
  std::vector<int64_t> chunks_;
  int next_ = 0;
  Tensor output_;
  mutable std::optional<double> loss_;
  std::vector<DeviceStats> bn_device_stats_;
  mutable std::vector<BatchNormStats> bn_stats_;  // the first bn_stats_.size() entries, read
  std::unique_ptr<Impl> impl_;
};

}  // namespace dpv
