#pragma once
// How rank 0 of a launched job collects what every rank computed, so it can assemble the same
// `dpv step --ddp` output the in-process ranks give: the results travel through the group as bytes
// (engine/ddp/ddp_rank_codec.h), which stays the engine's business.
#include <memory>
#include <vector>

#include "engine/ddp/ddp_rank.h"
#include "engine/process_groups/process_group.h"

namespace dpv {

class Device;

// Every rank's result, in rank order, on rank 0; empty on the other ranks. Collective: every rank of
// the group calls it. `device`: where the group's tensors must live (null: host memory, as Gloo
// wants; the rank's GPU for NCCL). Throws dpv::Error naming the rank whose bytes are not a result.
std::vector<DdpRankResult> gather_rank_results(ProcessGroup& group, const DdpRankResult& mine,
                                               const std::shared_ptr<Device>& device = nullptr);

}  // namespace dpv
