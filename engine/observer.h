#pragma once
// What each DataParallel stage reports: timings, bytes, and a value snapshot the app can draw
// (shapes, device placement, a few values, BatchNorm statistics per device and global, memory).
// Snapshots are plain values so they can cross threads (queued Qt signals) and be recorded.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/collectives.h"
#include "engine/process_groups/process_group.h"
#include "engine/dtype.h"
#include "engine/tensor.h"

namespace dpv {

// DataParallel uses Scatter .. Step; DDP uses Construct, Sample, BroadcastBuffers, Forward, Loss,
// Backward, Finalize and Step. The sharded strategies add GatherParams (FSDP's all-gather of the flat
// parameter before forward, and ZeRO-3's again before backward), FreeParams (ZeRO-3's reshard after
// forward), ReduceScatter (FSDP's gradient reduce-scatter, in Finalize's place) and BroadcastParams
// (ZeroRedundancyOptimizer's broadcast of each rank's stepped parameters).
enum class StageKind {
  Scatter, Replicate, Forward, Gather, Loss, GradScatter, Backward, ReduceGrads, Step,
  Construct, Sample, BroadcastBuffers, Finalize,
  GatherParams, FreeParams, ReduceScatter, BroadcastParams
};
// The stage names, once: the id used in traces, bench output and lesson files ("scatter",
// "grad_scatter", ...) and the short title the app shows ("Scatter", "Grad scatter", ...).
const char* stage_kind_name(StageKind k);
const char* stage_kind_title(StageKind k);

struct Stage {
  StageKind kind;
  int layer = -1;      // Forward/Backward: the layer index
  std::string title;   // "Forward 2: BatchNorm1d(16)"
};

// What a tensor in a stage snapshot is for. A switch over TensorRole has no default, so a new
// role some view does not handle is a compile warning there (-Wswitch).
enum class TensorRole { Input, Target, Param, Buffer, Activation, Grad, Output, Loss, Optimizer };
const char* tensor_role_name(TensorRole role);  // "input", "target", "param", "buffer", ..., "optimizer"

// A snapshot keeps every value of a tensor this small (enough for a heat map), else the first
// kSnapshotHeadValues: it never copies a whole activation of a real model to the host.
constexpr size_t kSnapshotAllValues = 128;
constexpr size_t kSnapshotHeadValues = 6;

// What a tensor's memory is for: the parts of a device's memory bar (and of its chips). Buckets:
// DDP's flat gradient buckets (DataParallel has none).
// Gathered: the sharded strategies' full parameters all-gathered from the shards (FSDP), alive
// only while a forward or backward needs them.
enum class MemoryKind { Batch, Parameters, Gradients, Activations, Optimizer, Output, Buckets, Gathered };
const char* memory_kind_name(MemoryKind kind);  // "batch", "parameters", "gradients", ..., "DDP buckets"

struct TensorInfo {
  std::string name;    // "input chunk", "0.weight", "activation 2", "grad 0.weight", "output", "loss"
  TensorRole role = TensorRole::Input;
  Shape shape;
  DType dtype = DType::Float32;
  int device = -1;     // index in the set; -1: host
  size_t bytes = 0;
  std::vector<double> head;  // every value when numel <= kSnapshotAllValues, else the first few
  int64_t first_row = -1;    // a piece of the batch: its rows [first_row, first_row + shape[0]); -1: not one
  std::string why;           // one sentence: why the device holds this tensor now
  MemoryKind memory = MemoryKind::Batch;  // which part of the device's memory it counts in
  bool view = false;         // a view of a tensor listed before it (chunk 0 of inputs): no memory of its own
  // The state-dict entry it belongs to ("0.weight" for the parameter, its .grad, its momentum;
  // "1.running_mean" for a buffer), so a front end can name it as the user's program does; empty
  // for everything else.
  std::string state_entry;
};

// A device's live allocations by what they hold. Every tensor the iteration and the trainer keep
// on the device is counted once (a view counts with the tensor it views); `other` is what the
// device's allocation counter holds beyond them (0 when the snapshot accounts for everything).
struct MemoryBreakdown {
  int64_t batch = 0;        // inputs and labels copied to the device, input chunks
  int64_t parameters = 0;   // parameters and buffers: the module's, or a replica's copies
  int64_t gradients = 0;    // parameter gradients (.grad on device 0, a replica's before the reduce)
  int64_t activations = 0;  // layer outputs and what backward saved, their gradients, BatchNorm statistics
  int64_t optimizer = 0;    // optimizer state (SGD momentum buffers)
  int64_t output = 0;       // the gathered output, its gradient and the loss
  int64_t buckets = 0;      // DDP: the rank's flat gradient buckets (the all-reduce's buffers)
  int64_t gathered = 0;     // FSDP: the full flat parameter all-gathered from the shards
  int64_t other = 0;
  int64_t total() const {
    return batch + parameters + gradients + activations + optimizer + output + buckets + gathered + other;
  }
  bool operator==(const MemoryBreakdown&) const = default;
};

struct BatchNormStats {
  int layer = -1;
  int device = -1;           // -1: the synchronised (global) statistics
  std::vector<double> mean;  // [C]
  std::vector<double> var;   // [C] biased variance used to normalise
  double count = 0;          // elements per channel
};

struct DeviceState {
  int device = 0;
  std::string label;         // "GPU 1 (simulated on CPU)"
  bool has_replica = false;  // holds a replica during this iteration
  bool replica_discarded = false;  // held one earlier in this iteration; it was freed after the backward
  int64_t chunk_rows = 0;    // rows of the batch scattered to it (0: idle)
  int64_t memory_bytes = 0;  // engine allocations live on the device
  int64_t memory_peak = 0;
  MemoryBreakdown memory;    // memory_bytes by what the allocations hold
  double busy_start = 0;     // seconds since the iteration began (equal to busy_end when idle)
  double busy_end = 0;
  std::vector<TensorInfo> tensors;  // what the device holds after the stage
};

// DDP: one bucket's all-reduce as it ran for one rank on the communication thread, with the ring's steps
// (seconds since the iteration began). It may overlap the Backward stages that followed its launch.
struct CommSpan {
  int device = 0;
  int bucket = 0;
  double t_launch = 0;
  double t_start = 0;
  double t_end = 0;
  size_t bytes = 0;
  std::vector<std::string> params;  // the bucket's parameters, in bucket order
  CollectiveReport report;
  std::vector<RingStep> ring;
};

// DDP: one bucket of one rank after a stage. Buckets are numbered in launch order.
struct BucketState {
  int bucket = 0;
  std::vector<std::string> params;  // in bucket order
  size_t bytes = 0;
  int ready = 0;          // gradients copied into the bucket so far (of params.size())
  bool launched = false;  // its all-reduce was queued (it was full and every earlier bucket had gone)
  bool finished = false;  // its all-reduce had completed when the stage ended (timing: may vary)
  // The first values of its flat buffer once full: the gradients ×1/W (waiting), the mean over the
  // ranks once the all-reduce finished; empty while filling (partly uninitialised), while the
  // all-reduce is in flight (the communication thread is writing it) and before the backward.
  std::vector<double> values;
};

// DDP: what a rank's .grad holds after a stage.
enum class GradState {
  None,      // no gradient of this iteration yet (zero_grad(set_to_none=True) or before the backward)
  Local,     // this rank's own gradients (the backward has produced them; not averaged)
  Averaged   // Finalize copied the bucket all-reduces back: the MEAN over the ranks
};
const char* grad_state_name(GradState s);  // "none", "local", "averaged"

// The sharded strategies: what one rank holds of the sharded state after a stage (snapshots only).
struct ShardState {
  int stage = 0;                   // ZeRO stage (0: not sharded, DDP)
  // ZeRO-1: the parameters whose optimizer state and step this rank owns.
  std::vector<std::string> owned_params;
  // ZeRO-2/3: this rank's slice [shard_begin, shard_begin + shard_numel) of the flat parameter.
  int64_t shard_begin = 0;
  int64_t shard_numel = 0;
  int64_t padding_in_shard = 0;    // of it, zero padding at the end of the flat parameter
  bool full_params = false;        // the full flat parameter is gathered on this rank now
  bool full_grads = false;         // the full flat gradient (this rank's own) exists now
  bool grad_shard_averaged = false;  // the reduce-scatter has left the averaged slice
  std::vector<double> shard_head;      // the slice's first values
  std::vector<double> grad_shard_head; // its averaged gradient's first values (after the reduce-scatter)
};

// DDP: one rank after a stage (snapshots only).
struct RankState {
  int rank = 0;
  std::vector<int64_t> samples;   // DistributedSampler's indices of the global batch for this rank
  std::vector<bool> padding;      // per sample: a duplicate the sampler added so every rank gets as many
  std::vector<std::vector<double>> sample_rows;  // per sample: its input row's values (at most kSnapshotAllValues); empty before Sample
  bool constructed = false;       // DDP built on this rank (after Construct)
  bool buckets_rebuilt = false;   // the one rebuild in gradient-ready order has happened
  std::vector<BucketState> buckets;
  GradState grads = GradState::None;
  std::string watched_param;      // the parameter whose values are shown ("4.weight")
  std::vector<double> param_head; // its first few values on this rank
  std::vector<double> grad_head;  // its gradient's first few values (empty: no gradient)
  std::string watched_buffer;     // the first buffer ("1.running_mean"), "" when the model has none
  std::vector<double> buffer_head;
  std::optional<double> loss;     // this rank's own loss (after Loss)
  ShardState shard;               // the sharded strategies' part (stage 0 under DDP)
};

// One weight element followed through ReduceGrads and Step (snapshots only), so the app can show
// the numbers: each replica's gradient, their sum on device 0, the gradient one device computes
// from the whole batch, and the weight before and after the optimizer step.
struct WeightElement {
  std::string param;                  // "0.weight"
  int64_t index = 0;                  // flat index into the parameter
  std::vector<double> replica_grads;  // [R] the replicas' gradients of this element, before the reduce
  double grad = 0;                    // the reduced gradient on device 0 (the sum)
  std::optional<double> single_device_grad;  // the whole batch through the module on one device
  std::optional<double> difference;          // grad - single_device_grad
  std::optional<double> weight_before;       // Step: before optimizer.step()
  std::optional<double> weight_after;        // Step: after it
};

struct StageEvent {
  int index = 0;             // position in the plan
  Stage stage;
  double t_start = 0;        // seconds since the iteration began
  double t_end = 0;
  std::vector<int64_t> chunk_sizes;
  std::vector<DeviceState> devices;       // empty unless the observer wants snapshots
  size_t bytes_moved = 0;
  std::vector<CollectiveReport> collectives;
  std::vector<BatchNormStats> batchnorm;  // Forward stages of BatchNorm layers (snapshots only)
  std::vector<CommSpan> comm;             // DDP Finalize: every bucket all-reduce of the backward
  std::vector<RankState> ranks;           // DDP: every rank after the stage (snapshots only)
  std::optional<double> loss;             // the Loss stage's value (snapshots only)
  std::optional<WeightElement> weight;    // ReduceGrads and Step (snapshots only)
  std::string summary;       // one plain sentence on what happened
};

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_stage(const StageEvent& event) = 0;
  // Whether stages build the value part of each event for this observer: `devices` (tensors,
  // memory, busy spans), `batchnorm` and `loss`. Building it reads device memory on the host, so
  // an observer that only adds up timings and bytes returns false and the run copies nothing to
  // the host between stages. Without any observer no snapshot is built either.
  virtual bool wants_snapshots() const { return true; }
};

}  // namespace dpv
