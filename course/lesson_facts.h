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
// forward). An event without rank snapshots leaves the facts as they were.
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
