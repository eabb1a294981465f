#pragma once
// Variable-sized blobs through a process group: how rank 0 of a launched job collects what every
// rank computed (results serialised as bytes) using only the group's collectives, on any backend.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/process_groups/process_group.h"

namespace dpv {

class Device;

// The most one rank may contribute. A rank's results (losses, gradients' summaries, a model's
// parameters at most) are far smaller; a size above this comes from a broken or foreign peer and is
// refused before anything is allocated for it.
inline constexpr int64_t kMaxGatheredBytesPerRank = int64_t{1} << 30;

// Every rank's `bytes`, in rank order, on every rank: an all-gather of the sizes, then one of the
// blobs padded to the largest. `device`: where the group's tensors must live (null: host memory,
// as Gloo wants; the rank's GPU for NCCL). Collective: every rank of the group calls it.
// Throws dpv::Error naming the rank and its size when a rank announces a negative size or one
// over kMaxGatheredBytesPerRank; every rank sees the same sizes, so every rank throws it before
// the second collective (none is left waiting in it).
std::vector<std::string> all_gather_bytes(ProcessGroup& group, const std::string& bytes,
                                          const std::shared_ptr<Device>& device = nullptr);

}  // namespace dpv
