#pragma once
// DDP communication hooks (DistributedDataParallel.register_comm_hook, PyTorch 1.13) with the
// default hooks of torch/distributed/algorithms/ddp_comm_hooks:
//   allreduce_hook       buffer.div_(world), then a SUM all-reduce: the same result as no hook
//   fp16_compress_hook   buffer.to(float16).div_(world), all-reduced as float16, copied back
//   bf16_compress_hook   the same with bfloat16, which torch 1.13's Gloo cannot all-reduce
//   powerSGD_hook        low-rank compression with error feedback and warm start (powersgd.h)
// With a hook registered the Reducer copies each gradient into its bucket WITHOUT the 1/world
// (the hook divides), hands the whole bucket to the hook once it is ready, and the tensor the hook
// returns becomes the bucket's averaged gradients: the hook replaces the bucket's all-reduce.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/process_groups/process_group.h"
#include "engine/tensor.h"

namespace dpv {

enum class CommHookKind : uint8_t { None, AllReduce, Fp16Compress, Bf16Compress, PowerSgd };

// PowerSGDState's arguments (batch_tensors_with_same_shape is always False here).
struct PowerSgdOptions {
  int matrix_approximation_rank = 1;
  int64_t start_powerSGD_iter = 1000;
  double min_compression_rate = 2;
  bool use_error_feedback = true;
  bool warm_start = true;
  double orthogonalization_epsilon = 0;
  uint32_t random_seed = 0;  // np.random.RandomState(random_seed): 0 .. 2**32 - 1
  bool operator==(const PowerSgdOptions&) const = default;
};

struct CommHookOptions {
  CommHookKind kind = CommHookKind::None;
  PowerSgdOptions powersgd;  // read only with kind == PowerSgd
  bool operator==(const CommHookOptions&) const = default;
};

// PyTorch's function name: "allreduce_hook", "fp16_compress_hook", ..., "none" without a hook.
const char* comm_hook_name(CommHookKind kind);
// The CLI's short names: "allreduce", "fp16", "bf16", "powersgd"; throws dpv::Error (ValueError)
// for another name.
CommHookKind parse_comm_hook(const std::string& name);
// Refuses what PyTorch's PowerSGDState refuses (start_powerSGD_iter <= 1 with error feedback or
// warm start) and values it cannot take, with a dpv::Error (ValueError) that says what to change.
void check_comm_hook_options(const CommHookOptions& options);

// The GradBucket a hook sees: its flat buffer ([numel], float32, host memory), its index, whether
// it is the iteration's last, and the parameters' shapes and offsets in the buffer
// (bucket.gradients() are views of these slices).
struct GradBucket {
  int index = 0;
  bool is_last = false;
  Tensor buffer;                  // [numel]
  std::vector<Shape> shapes;      // per parameter in the bucket, in bucket order
  std::vector<int64_t> offsets;   // element offset of each parameter in `buffer`
};

// What a hook did to one bucket: its collectives (one report each, in the order issued) and the
// bytes it sent against the bytes the plain float32 all-reduce of the bucket would have sent.
struct CommHookRun {
  std::vector<CollectiveReport> collectives;
  std::vector<std::string> collective_names;  // per collective: "bucket", "uncompressed", "P", "Q"
  size_t bytes_sent = 0;          // the sum of the collectives' payloads
  size_t bytes_uncompressed = 0;  // the bucket's bytes (what allreduce_hook sends)
  bool compressed = false;        // PowerSGD compressed this bucket (past start_powerSGD_iter)
};

class CommHook {
 public:
  virtual ~CommHook() = default;
  virtual CommHookKind kind() const = 0;
  // Runs the hook on a ready bucket: every rank calls it for the same buckets in the same order
  // (the hook's collectives are blocking). On return bucket.buffer holds the averaged gradients.
  virtual CommHookRun run(GradBucket& bucket, ProcessGroup& group) = 0;
};

// The hook for `options` (kind != None), with its state (PowerSGD's) owned by the returned object.
// Throws dpv::Error when the group cannot run it (bfloat16: torch 1.13's Gloo cannot all-reduce it).
std::unique_ptr<CommHook> make_comm_hook(const CommHookOptions& options, const ProcessGroup& group);

// What allreduce_hook does (and powerSGD_hook before start_powerSGD_iter): bucket.buffer.div_(world),
// then a SUM all-reduce of it.
CommHookRun allreduce_mean(GradBucket& bucket, ProcessGroup& group);
// t.div_(world) on a float32 host tensor (an IEEE division per element, as torch's div_).
void divide_by_world(Tensor& t, int world);

}  // namespace dpv
