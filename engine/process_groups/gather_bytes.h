#pragma once
// Variable-sized blobs through a process group: how rank 0 of a launched job collects what every
// rank computed (results serialised as bytes) using only the group's collectives, on any backend.
#include <memory>
#include <string>
#include <vector>

#include "engine/process_groups/process_group.h"

namespace dpv {

class Device;

// Every rank's `bytes`, in rank order, on every rank: an all-gather of the sizes, then one of the
// blobs padded to the largest. `device`: where the group's tensors must live (null: host memory,
// as Gloo wants; the rank's GPU for NCCL). Collective: every rank of the group calls it.
std::vector<std::string> all_gather_bytes(ProcessGroup& group, const std::string& bytes,
                                          const std::shared_ptr<Device>& device = nullptr);

}  // namespace dpv
