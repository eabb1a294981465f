#pragma once
// One rank of torch.nn.parallel.DistributedDataParallel (PyTorch 1.13), written only against
// ProcessGroup&: the same code runs on in-process ranks (threads over make_in_process_group) and
// on launched processes (Gloo or NCCL groups). Each stage of an iteration is a method so a driver
// can step them one at a time; run_iteration() runs them in order.
//
//  construction   refuse a module with no trainable parameter; all-gather the parameter counts
//                 and check the shapes against rank 0's (PyTorch's messages); broadcast rank 0's
//                 whole state dict (parameters and buffers)
//  sync_buffers   with broadcast_buffers and a model that has buffers: rank 0's buffers are
//                 broadcast before every forward, one flat broadcast per dtype
//  forward        layer by layer on this rank's shard (BatchNorm with this rank's statistics, or
//                 SyncBatchNorm over the group when options.sync_bn)
//  loss           mean cross-entropy over this rank's shard (the loss is NOT averaged over ranks)
//  backward       layer by layer; each parameter gradient is handed to the Reducer as soon as its
//                 layer produced it, in PyTorch's ready order (see ready_order_in_layer)
//  finalize       wait for the bucket all-reduces; .grad holds the MEAN over ranks
//  step           the optimizer on this rank (every rank steps the same averaged gradients)
//
// With options.zero_stage the same rank runs the sharded strategies (engine/zero/sharding.cpp):
//  1  ZeroRedundancyOptimizer over DDP: the step covers only this rank's partition of the
//     parameters (so only it has optimizer state), then broadcast_params sends every rank's
//  2  FSDP SHARD_GRAD_OP: after construction only this rank's slice of the flat parameter stays;
//     gather_params all-gathers it before the forward; the backward writes into one flat gradient,
//     reduce_scatter_gradients averages it into this rank's slice and frees the full parameter and
//     gradient; the step covers the slice
//  3  FSDP FULL_SHARD: as 2, and free_params after the forward, gather_params again before backward
// iteration_plan() lists the stages of each, and run_stage() runs any of them.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/ddp/comm_thread.h"
#include "engine/ddp/reducer.h"
#include "engine/process_groups/process_group.h"
#include "engine/layer.h"
#include "engine/model.h"
#include "engine/observer.h"
#include "engine/optim/optimizer.h"
#include "engine/zero/flat_layout.h"

namespace dpv {

// DistributedDataParallel's constructor arguments the engine honours (a run description's DDP part).
struct DdpSettings {
  bool broadcast_buffers = true;   // DistributedDataParallel(broadcast_buffers=True)
  double bucket_cap_mb = 25.0;     // DistributedDataParallel(bucket_cap_mb=25)
  // dist._DEFAULT_FIRST_BUCKET_BYTES when DDP was constructed: the limit of the first rebuilt
  // bucket. The app makes it small so a small model still gets several buckets to watch.
  size_t first_bucket_bytes = kDdpFirstBucketBytes;
  bool operator==(const DdpSettings&) const = default;
};

// What one DDP rank is built with: the optimizer's and BatchNorm's settings and DDP's own.
struct DdpOptions : DdpSettings {
  OptimizerSettings optimizer;     // each rank's own torch.optim.SGD, Adam or AdamW
  bool sync_bn = false;            // BatchNorm layers run as SyncBatchNorm over the group
  int zero_stage = 0;              // 0: DDP; 1, 2, 3: the sharded strategies (see above)
  // register_comm_hook's hook (engine/ddp/comm_hooks): DDP only (zero_stage 0).
  CommHookOptions comm_hook;
  // Iterations (1 = the first this rank runs) whose backward also measures the hook's gradient
  // error against the exact average (Reducer::set_hook_error_probe; the same on every rank).
  std::vector<int64_t> probe_hook_error_at;
};

// The stages of one iteration on a rank, after Construct and Sample, for `options` (DDP's, or a
// sharded strategy's): what DdpRank::run_iteration runs and what the drivers step through.
std::vector<Stage> rank_iteration_plan(const Model& model, const DdpOptions& options);

// Where the gradients of one layer become ready, first to last (AccumulateGrad order in PyTorch's
// autograd, checked with real DDP): Linear: bias then weight (addmm's backward yields the bias
// gradient first); Conv2d: weight then bias; BatchNorm: weight then bias.
std::vector<std::string> ready_order_in_layer(const Layer& layer, DType dtype);

// What one rank holds after its last iteration (host tensors), for outputs and comparisons.
struct DdpRankResult {
  int rank = 0;
  Tensor output;            // [n_r, K] this rank's output of the last forward
  double loss = 0;          // this rank's loss of the last iteration
  TensorMap state;          // params and buffers after the last step ("0.weight", "1.running_mean")
  TensorMap grads;          // the averaged gradients of the last backward
  std::vector<BatchNormStats> batchnorm;  // last forward: this rank's (device = rank) and, with sync, global (-1)
  std::vector<std::vector<std::string>> buckets;  // parameter names per bucket, as used in the last backward
  std::vector<size_t> ready_order;                // parameter indices in the order they became ready
  std::vector<BucketRun> bucket_runs;
  std::vector<int64_t> sample_indices;            // the global-batch rows this rank trained on, last step
  TensorMap comm_hook_state;  // the hook's state on this rank (engine/ddp/comm_hooks/hook_output.h names)
  // The sharded strategies (zero_stage > 0). Under ZeRO-2/3 `state` holds only the buffers and
  // `grads` nothing: the full parameters and gradients are the ranks' flat slices put together.
  int zero_stage = 0;
  ZeroPartition partition;  // ZeRO-1: every rank's parameters (the same on every rank)
  FlatLayout flat_layout;   // ZeRO-2/3: the flat parameter's layout (the same on every rank)
  TensorMap optim;          // ZeRO-1: "<param>/<state>" for each parameter this rank owns
  Tensor flat_param;        // ZeRO-2/3: [L/W] this rank's slice after the last step
  Tensor flat_grad;         // [L/W] its averaged gradient slice
  TensorMap flat_state;     // state name ("exp_avg", "momentum_buffer") -> [L/W]
};

class DdpRank {
 public:
  // Runs the construction collectives; every rank of `group` must construct at the same time.
  // `state` is checked against the model and copied to `device`; `clock` gives seconds for timings.
  DdpRank(ProcessGroup& group, std::shared_ptr<Device> device, const Model& model, const TensorMap& state,
          DdpOptions options, std::function<double()> clock = {});
  ~DdpRank();
  DdpRank(const DdpRank&) = delete;
  DdpRank& operator=(const DdpRank&) = delete;

  int rank() const { return group_.rank(); }
  int world_size() const { return group_.size(); }
  const Model& model() const { return model_; }
  const DdpOptions& options() const { return options_; }
  // The SGD learning rate of the next step (Strategy::set_learning_rate).
  void set_learning_rate(double lr);
  Device& device() const { return *device_; }
  const std::shared_ptr<Device>& device_ptr() const { return device_; }

  // This rank's shard: rows `indices` of the global batch (host or any device).
  void set_batch(const Tensor& global_input, const Tensor& global_target, const std::vector<int64_t>& indices);
  // Stages, in order. Each one that talks to the group returns its collective reports.
  bool will_sync_buffers() const;
  std::vector<CollectiveReport> sync_buffers();
  std::vector<CollectiveReport> forward_layer(int layer);
  void compute_loss();
  std::vector<CollectiveReport> backward_layer(int layer);  // may launch bucket all-reduces
  void finalize();
  void optimizer_step();
  // One whole iteration on the batch set by set_batch.
  void run_iteration();
  // Any stage of rank_iteration_plan (Construct and Sample are the driver's); its collectives.
  std::vector<CollectiveReport> run_stage(const Stage& stage);

  // The sharded strategies (engine/zero/sharding.cpp).
  int zero_stage() const { return options_.zero_stage; }
  std::vector<CollectiveReport> gather_params();             // ZeRO-2/3: shard -> full flat parameter
  void free_params();                                        // ZeRO-2/3: only the shard stays
  std::vector<CollectiveReport> reduce_scatter_gradients();  // ZeRO-2/3: averaged slice; frees full ones
  std::vector<CollectiveReport> broadcast_params();          // ZeRO-1: each rank's stepped parameters
  const ZeroPartition& partition() const { return partition_; }  // ZeRO-1: every rank's parameters
  const FlatLayout& flat_layout() const { return flat_layout_; }  // ZeRO-2/3
  const Tensor& flat_param_shard() const { return shard_param_; }  // [L/W]
  const Tensor& flat_grad_shard() const { return shard_grad_; }    // [L/W] after the reduce-scatter
  const Tensor& gathered_params() const { return full_params_; }   // [L] while gathered
  const Tensor& flat_grads() const { return full_grads_; }         // [L] this rank's own, until reduce-scattered
  bool has_reducer() const { return reducer_ != nullptr; }
  // From the next backward on: the backward writes each gradient straight into its bucket slot, so
  // .grad ends up a view of the bucket (gradient_as_bucket_view=True's layout; the values are the
  // same, bit for bit). Off by default, and whenever someone looks at .grad before the averaging.
  // Switching it off gives the current .grad tensors storage of their own again.
  void set_gradients_in_buckets(bool on);
  // BatchNorm + ReLU in one pass (LayerRun::fuse_next_relu), as DataParallel's unobserved
  // iterations run them: the same bits, one pass over the activation fewer each way. Only where
  // nobody looks at a BatchNorm's own output (no snapshots); never for SyncBatchNorm's layers.
  void set_fuse_batchnorm_relu(bool on) { fuse_batchnorm_relu_ = on; }

  const Tensor& output() const { return output_; }  // after the last forward layer
  double loss() const { return loss_; }
  const TensorMap& params() const { return replica_.params; }
  const TensorMap& buffers() const { return replica_.buffers; }
  const TensorMap& grads() const { return replica_.grads; }
  // What the rank keeps on its device between stages, for snapshots (engine/ddp/rank_snapshot.h).
  const std::vector<LayerCache>& caches() const { return replica_.caches; }
  // This rank's torch.optim state (momentum buffers; Adam's moments), equal on every rank.
  const ParameterOptimizer& optimizer() const { return optimizer_; }
  ParameterOptimizer& optimizer() { return optimizer_; }
  // A resumed run's buckets, rebuilt from the first backward's ready order (Reducer::rebuild_from).
  void restore_buckets(const std::vector<size_t>& first_ready_order) { reducer_->rebuild_from(first_ready_order); }
  const Tensor& input() const { return input_; }    // [n_r, ...] this rank's shard
  const Tensor& target() const { return target_; }  // [n_r]
  const Tensor& flow() const { return flow_; }      // the activation or gradient the next layer takes
  const Tensor& output_grad() const { return dlogits_; }  // [n_r, K] d loss / d output
  const Reducer& reducer() const;  // DDP and ZeRO-1 (check has_reducer())
  const std::vector<BatchNormStats>& batchnorm_stats() const { return bn_stats_; }
  int64_t iterations() const { return iterations_; }
  // The last backward's hook error, when options.probe_hook_error_at asked for it.
  std::optional<HookErrorMeasure> hook_error() const;
  DdpRankResult result() const;

 private:
  void construct(const TensorMap& state);
  std::unique_ptr<CommHook> make_rank_comm_hook() const;  // options_.comm_hook's, or null
  void shard_after_construct();    // engine/zero/sharding.cpp
  void start_flat_gradients();     // ZeRO-2/3: the backward writes into one flat gradient
  void step_shards();              // ZeRO-1/2/3's optimizer step
  void add_sharded_result(DdpRankResult& r) const;
  LayerRun layer_run(int layer);

  ProcessGroup& group_;
  std::shared_ptr<Device> device_;
  const Model& model_;
  DdpOptions options_;
  ParameterOptimizer optimizer_;
  std::function<double()> clock_;
  CommThread comm_;
  Replica replica_;
  std::unique_ptr<Reducer> reducer_;
  std::vector<std::string> param_names_;
  std::vector<std::vector<size_t>> ready_in_layer_;  // per layer: parameter indices, ready order

  Tensor input_, target_;   // this rank's shard on the device
  std::vector<int64_t> indices_;
  Tensor flow_;             // activation (forward) / gradient (backward)
  Tensor output_;           // [n_r, K] the last forward's output
  Tensor dlogits_;
  double loss_ = 0;
  std::vector<BatchNormStats> bn_stats_;
  int64_t iterations_ = 0;
  int64_t steps_ = 0;
  bool gradients_in_buckets_ = false;
  bool fuse_batchnorm_relu_ = false;

  ZeroPartition partition_;  // ZeRO-1
  FlatLayout flat_layout_;   // ZeRO-2/3
  Tensor shard_param_;       // [L/W]
  Tensor shard_grad_;        // [L/W]
  Tensor full_params_;       // [L] gathered; undefined when freed
  Tensor full_grads_;        // [L] the backward's flat gradient; undefined outside the backward
};

// The launched path: construct DDP on this rank, then `steps` iterations on the same GLOBAL batch,
// this rank training on DistributedSampler(shuffle=False, drop_last=False)'s indices of it.
DdpRankResult run_rank_steps(ProcessGroup& group, std::shared_ptr<Device> device, const Model& model,
                             const TensorMap& state, const Tensor& global_input, const Tensor& global_target,
                             const DdpOptions& options, int steps);

}  // namespace dpv
