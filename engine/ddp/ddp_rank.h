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
//  step           torch.optim.SGD on this rank (every rank steps the same averaged gradients)
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/ddp/comm_thread.h"
#include "engine/ddp/reducer.h"
#include "engine/process_groups/process_group.h"
#include "engine/layer.h"
#include "engine/model.h"
#include "engine/observer.h"
#include "engine/optim/optimizer.h"

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
};

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
  // From the next backward on: the backward writes each gradient straight into its bucket slot, so
  // .grad ends up a view of the bucket (gradient_as_bucket_view=True's layout; the values are the
  // same, bit for bit). Off by default, and whenever someone looks at .grad before the averaging.
  // Switching it off gives the current .grad tensors storage of their own again.
  void set_gradients_in_buckets(bool on);

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
  const Reducer& reducer() const { return *reducer_; }
  const std::vector<BatchNormStats>& batchnorm_stats() const { return bn_stats_; }
  int64_t iterations() const { return iterations_; }
  DdpRankResult result() const;

 private:
  void construct(const TensorMap& state);
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
};

// The launched path: construct DDP on this rank, then `steps` iterations on the same GLOBAL batch,
// this rank training on DistributedSampler(shuffle=False, drop_last=False)'s indices of it.
DdpRankResult run_rank_steps(ProcessGroup& group, std::shared_ptr<Device> device, const Model& model,
                             const TensorMap& state, const Tensor& global_input, const Tensor& global_target,
                             const DdpOptions& options, int steps);

}  // namespace dpv
