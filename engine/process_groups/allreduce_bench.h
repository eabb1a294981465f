#pragma once
// The measurement of `dpv bench allreduce` over a job's process group, as nccl-tests and
// bench/allreduce_vs_pytorch.py make it: per size, one checked call, warm-up calls, then the mean
// time of up to `iters` calls after a barrier, the slowest rank's time counting;
// algbw = bytes / time, busbw = algbw * 2(world-1)/world. Every tensor it hands the group lives
// on `device` (null: host memory, as Gloo wants; the rank's GPU for NCCL, which rejects host
// memory), the per-rank times included. Collective: every rank of the group calls it.
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "engine/process_groups/process_group.h"

namespace dpv {

class Device;

struct AllreduceBenchPlan {
  double min_bytes = 4096, max_bytes = 64.0 * 1024 * 1024;
  int factor = 4;  // sizes grow by this factor
  int iters = 20, warmup = 3;
  double max_seconds_per_size = 2.0;  // fewer iterations for the large sizes on slow links
};

struct AllreduceSizeResult {
  size_t bytes = 0;
  int iters = 0;
  double seconds = 0, algbw = 0, busbw = 0;
};

// The largest of every rank's `value`, on every rank: an all-gather of one float64 per rank on `device`.
double max_over_ranks(ProcessGroup& group, double value, const std::shared_ptr<Device>& device);

// Every size of `plan` in turn; `on_size` sees each result as soon as it is measured (rank 0
// prints it). Throws dpv::Error when the checked call's sum is wrong.
std::vector<AllreduceSizeResult> measure_allreduce(ProcessGroup& group, const std::shared_ptr<Device>& device,
                                                   const AllreduceBenchPlan& plan,
                                                   const std::function<void(const AllreduceSizeResult&)>& on_size);

}  // namespace dpv
