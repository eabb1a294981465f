#pragma once
// Internal state of one DataParallel iteration, shared by the stage runners
// (parallel/stages_*.cpp) and the snapshot builder (parallel/snapshot.cpp).
#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "engine/data_parallel.h"

namespace dpv {

class MemoryListing;  // engine/memory_listing.h

// What a replica's `flow` tensor is, for snapshots: "input chunk", "activation 2", "grad of
// activation 1". Kept as its parts and written out only when a snapshot lists the tensor.
struct FlowLabel {
  const char* what = "";
  int layer = 0;
  bool numbered = false;
  std::string text() const { return numbered ? std::string(what) + " " + std::to_string(layer) : std::string(what); }
};

struct Iteration::Impl {
  Iteration& it;
  Trainer& tr;
  DeviceSet& devs;
  int R = 0;           // replicas actually used (number of chunks)
  std::vector<int64_t> chunk_begin;  // [R] first row of each chunk in the batch
  bool multi = false;  // DataParallel's multi-device path (more than one device in the set)
  bool failed = false;
  bool describe = true;  // the current stage's event gets its texts (someone will read them)

  Tensor input_dev0;   // [N, ...] the batch on device 0 (inputs.cuda())
  Tensor target_dev0;  // [N] int64 on device 0
  std::vector<Replica> replicas;       // [R]
  std::vector<Tensor> chunk_inputs;    // [R] each [n_j, ...]
  std::vector<Tensor> flow;            // [R] current activation (forward) or its gradient (backward)
  std::vector<FlowLabel> flow_name;    // [R] what `flow` is, for snapshots
  Tensor dlogits;                      // [N, K] on device 0
  Tensor loss_tensor;                  // [] on device 0
  bool grads_reduced = false;
  bool graph_freed = false;  // the backward is over: replicas 1.., activations and grad of output freed
  WeightElement weight;      // the element snapshots follow through ReduceGrads and Step

  std::chrono::steady_clock::time_point t0;
  std::vector<double> busy_start, busy_end;  // per device, seconds since t0, for the current stage

  Impl(Iteration& iteration, Trainer& trainer);
  double now() const;
  void reset_busy();
  // Runs fn(j) for every replica on its device's thread, timing each device; re-raises the lowest
  // failing replica's error the way parallel_apply does.
  // fn(j) for every replica on its device's thread. Replicas never wait for one another (the
  // collectives between stages run on the caller): by default their work is independent and of
  // unknown size; bytes_moved: independent copies moving that many bytes in all, which run inline
  // when smaller than a hand-off (DeviceSet::run_parallel).
  void run_replicas(const std::function<void(int)>& fn, int64_t bytes_moved = DeviceSet::kIndependentWork);
  // Re-raises replica j's error, wrapped as parallel_apply wraps it when there are several devices.
  [[noreturn]] void rethrow_replica_error(const std::exception_ptr& error, int j) const;
  LayerRun layer_run(int j, int layer);
  // Rows of chunk j of a batch-major tensor (a view).
  Tensor chunk_of(const Tensor& t, int j) const;
  // A stage made of one collective per tensor: every replica is busy from `start` to now, and the
  // per-tensor reports add up to one report for the stage.
  void finish_collective_stage(StageEvent& e, CollectiveReport& total, double start);

  // Stage runners fill the event's payload (bytes, collectives, statistics, summary).
  void scatter(StageEvent& e);
  void replicate(StageEvent& e);
  void forward(StageEvent& e, int layer);
  void forward_sync_bn(StageEvent& e, int layer);
  void gather(StageEvent& e);
  void loss(StageEvent& e);
  void grad_scatter(StageEvent& e);
  void backward(StageEvent& e, int layer);
  void backward_sync_bn(StageEvent& e, int layer);
  void reduce_grads(StageEvent& e);
  void step_optimizer(StageEvent& e);

  // What loss.backward() frees when it is done (the autograd graph): the replicas on devices 1..
  // with their chunks, every activation saved for backward, the output's gradient.
  void free_graph();

  void fill_snapshot(StageEvent& e) const;
  // fill_snapshot's pieces: one device's state without its tensors, then its tensors by who holds
  // them (device 0's module and batch, replica d's chunk, copies, saved tensors and gradients, the
  // BatchNorm statistics kept for reporting).
  DeviceState device_header(int d) const;
  void list_module_and_batch(MemoryListing& list) const;
  void list_replica(MemoryListing& list, int d, const Stage& stage, bool backward_started) const;
  void list_layer_caches(MemoryListing& list, const Replica& rep) const;
  void list_flow(MemoryListing& list, int d, const Stage& stage, bool backward_started) const;
  void list_batchnorm_stats(MemoryListing& list, int d) const;
  // What flow[d] stands for after `stage` when BatchNorm + ReLU ran in one pass: after the
  // BatchNorm's forward, its own output (rebuilt; the flow already went through the ReLU); after
  // the ReLU's backward, which passed the gradient through, the gradient with the ReLU's mask.
  // Otherwise flow[d] itself.
  Tensor flow_as_seen(int d, const Stage& stage) const;
  // Snapshots: the followed weight element before a ReduceGrads or Step stage runs, and after it.
  void weight_before_stage(StageKind kind);
  void weight_after_stage(StageEvent& e);
  // The followed element's gradient when the whole batch goes through the module on device 0
  // alone (a separate pass on copies of the buffers; its allocations are kept out of the peak).
  // Empty when that pass fails.
  std::optional<double> single_device_gradient() const;
  double single_device_pass() const;
};

}  // namespace dpv
