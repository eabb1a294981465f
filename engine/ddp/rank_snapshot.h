#pragma once
// What the app draws of one DDP rank after a stage (engine/observer.h RankState): its shard, its
// buckets (how full, launched, finished), what its .grad holds, and a few values of one parameter,
// its gradient and one buffer, so a learner can see the ranks agree (or not) stage by stage.
#include <vector>

#include "engine/ddp/ddp_rank.h"
#include "engine/observer.h"

namespace dpv {

// What the iteration knows about where it is; the rank supplies the rest.
struct RankSnapshotContext {
  std::vector<int64_t> samples;    // this rank's DistributedSampler indices
  std::vector<bool> padding;       // per sample: a padding duplicate
  bool backward_started = false;   // a Backward stage of this iteration has run
  bool finalized = false;          // this iteration's Finalize has run
  bool loss_computed = false;      // this iteration's Loss has run
};

// The parameter the snapshot follows: the last layer's weight (its gradient is ready first).
std::string watched_parameter(const Model& model);

// Copies kHeadValues values of the watched tensors to the host. `rank` may be null before Construct.
RankState snapshot_rank(const DdpRank* rank, int rank_index, const Model& model, const RankSnapshotContext& context);

constexpr size_t kRankHeadValues = 4;

// What rank `rank` keeps on its device, into `device` (DeviceState::tensors and memory by kind,
// through MemoryListing, as DataParallel's snapshots): its shard, parameters and buffers, .grad,
// momentum, what the layers saved for backward, its own output and its gradient, and the flat
// gradient buckets (MemoryKind::Buckets). `device.memory_bytes` must be read first; what the
// counter holds beyond these (a bucket all-reduce's scratch while one is in flight) is `other`.
// `copy_values` false: the memory account only (no TensorInfo::head read from the device).
void list_rank_memory(const DdpRank& rank, DeviceState& device, bool copy_values = true);

// The sharded strategies' part of a rank's snapshot (engine/zero/shard_snapshot.cpp).
ShardState snapshot_shard(const DdpRank& rank);

}  // namespace dpv
