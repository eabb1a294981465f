#pragma once
// The facts of the current run that the stage lessons may talk about, as typed values read from
// the engine (the strategy, its iteration and the batch), so a lesson sentence is written from the
// run it describes and cannot contradict the picture. lesson_facts() is the one place they are
// worked out; the app carries the result to its lesson panel, the lesson templates
// (course/lesson_template.h) read them by name through fact_table().
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "engine/run/run_spec.h"
#include "engine/strategy.h"
#include "engine/tensor.h"

namespace dpv::course {

struct LessonFacts {
  // The strategy and the devices.
  bool ddp = false;                  // DistributedDataParallel (else nn.DataParallel)
  int64_t batch = 0;                 // rows of the global batch
  int devices = 0;                   // devices in the set (DDP: the world size)
  // DataParallel's Scatter: torch.chunk's sizes, one replica per chunk; the devices past the
  // last chunk stay idle. Under DDP the same sizes are what DataParallel would have made.
  std::vector<int64_t> chunks;       // [replicas]
  int replicas = 0;
  int idle_devices = 0;              // devices - replicas (DataParallel)
  // DDP's DistributedSampler (no shuffle, no drop_last): samples per rank, the padded total and
  // the repeated samples (the first `repeated` indices of the batch, seen twice).
  int64_t per_rank = 0;
  int64_t padded_total = 0;
  int64_t repeated = 0;
  std::vector<int64_t> rank0_samples;  // rank 0's indices of the global batch
  std::vector<int64_t> last_rank_samples;
  // The model.
  std::string model;                 // the preset's name, or "your model"
  bool has_batchnorm = false;
  bool sync_bn = false;              // BatchNorm computes the whole batch's statistics
  // DataParallel, BatchNorm normalising each chunk with its own statistics, more than one
  // replica: the summed replica gradients are not the one-device gradient of the whole batch.
  bool bn_breaks_sum = false;
  // DDP, BatchNorm per rank (no SyncBatchNorm), more than one rank.
  bool bn_per_rank = false;
  int64_t out_features = 0;          // the last Linear layer's
  int64_t last_in_features = 0;
  std::vector<int64_t> output_shape;  // DataParallel's gathered output [batch, out_features]
  // Which loss the app's loss strip and the stage's "loss:" line show: DataParallel's one loss
  // over the whole gathered batch, or DDP rank 0's own shard's loss.
  bool loss_whole_batch = true;
  int64_t loss_rows = 0;             // rows that loss averages over
  // The iteration and DDP's buffers and buckets.
  int iteration = 1;                 // 1 for the first after (re)configuring
  bool broadcast_buffers = false;    // DistributedDataParallel(broadcast_buffers=...)
  bool has_buffers = false;          // the model has buffers (BatchNorm's running statistics)
  int buckets = 0;                   // buckets rank 0's reducer holds now
  bool buckets_rebuilt = false;      // the one rebuild in gradient-ready order has happened
  int64_t bucket_cap_bytes = 0;      // bucket_cap_mb in bytes
  int64_t first_bucket_bytes = 0;    // dist._DEFAULT_FIRST_BUCKET_BYTES
  // The sharded strategies on DDP's ranks (ZeRO-1: ZeroRedundancyOptimizer; ZeRO-2/3: FSDP's
  // SHARD_GRAD_OP and FULL_SHARD); zero_stage 0 under DataParallel and DDP, where the rest stay 0.
  int zero_stage = 0;
  std::string optimizer;                      // DDP and ZeRO: each rank's torch.optim class, "Adam"
  std::vector<std::string> optimizer_states;  // its state tensors shaped like a parameter ("exp_avg", "exp_avg_sq")
  bool optimizer_step_counts = false;         // Adam/AdamW also keep a "step" per parameter
  int64_t param_numel = 0;                    // Ψ: the model's parameter elements
  int param_count = 0;                        // the model's parameter tensors
  int64_t element_bytes = 0;                  // bytes per element of the model's dtype
  // ZeRO-1: ZeroRedundancyOptimizer's greedy partition, read from rank 0's (the same on every rank).
  std::vector<std::string> rank0_owned;       // the parameters rank 0 steps, in partition order
  int64_t rank0_owned_numel = 0;
  // ZeRO-2/3: the flat parameter (rank 0's FlatLayout, the same on every rank).
  int64_t flat_numel = 0;                     // the parameters' elements in it
  int64_t flat_padded_numel = 0;              // L: rounded up to a multiple of W
  int64_t shard_numel = 0;                    // L / W: each rank's slice
  int64_t last_shard_padding = 0;             // zeros at the end of the last rank's slice
  double pre_divide = 0, post_divide = 0;     // FSDP's gradient pre- and post-divide factors (W = 3: 2, 1.5)
  int gathers_per_step = 0;                   // all-gathers of the flat parameter per iteration (1 or 2)
  // One collective's size as nccl-tests counts it (CollectiveReport::bytes), from the layout:
  // FSDP's all-gather and reduce-scatter of the flat parameter, L × element bytes; DDP's
  // all-reduce of every gradient, Ψ × element bytes.
  int64_t flat_bytes = 0;
  int64_t allreduce_bytes = 0;
  // The stage just run (lesson_facts_after, from rank 0's CollectiveReports in its event): how
  // many collectives of each kind and their bytes (nccl-tests size, summed).
  int stage_collectives = 0;
  int64_t stage_bytes = 0;
  int stage_index = -1;                       // the stage's position in the plan (-1 before any)
  int backward_gather_index = -1;             // ZeRO-3: the plan position of the all-gather before the backward
  // Simulated devices and the host's cores.
  bool simulated = false;            // CPU devices standing in for GPUs
  int host_cores = 0;
  bool shared_cores = false;         // more simulated devices than cores: not all compute at once
};

// The facts of `iteration` (begun on `strategy`, made from `spec`, with the global batch `input`
// [N, ...]), `iteration_number` counting from 1 after the strategy was made. Read again between stages:
// DDP's bucket facts change at the second iteration's forward (the rebuild).
LessonFacts lesson_facts(const RunSpec& spec, const Strategy& strategy, const StrategyIteration& iteration, const Tensor& input,
                         int iteration_number);

// The facts as they stand after the stage `event` of the same iteration: DDP's bucket facts follow
// rank 0's reducer as the event reports it (the rebuild happens at the second iteration's first
// forward; an event without rank snapshots leaves them as they were); the stage's collectives and
// bytes are the event's.
LessonFacts lesson_facts_after(LessonFacts facts, const StageEvent& event);

// One fact as the templates see it: a condition (bool) or a value (number or text).
using FactValue = std::variant<bool, int64_t, std::string>;
struct NamedFact {
  std::string name;         // "batch", "has_batchnorm", ...
  FactValue value;
  std::string meaning;      // for the lessons' README and error messages
};
// Every fact by name, conditions and values, derived from `facts` (texts such as "3, 3, 3, 1"
// and "[8, 10]" are formatted here, once).
std::vector<NamedFact> fact_table(const LessonFacts& facts);

}  // namespace dpv::course
