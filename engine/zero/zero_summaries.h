#pragma once
// The one sentence each stage of DDP and the sharded strategies reports (StageEvent::summary),
// written from the run: rank 0's partition, flat layout and factors, not from a template.
#include <string>

#include "engine/ddp/ddp_rank.h"
#include "engine/observer.h"

namespace dpv {

// Step, on DDP or a sharded strategy.
std::string step_summary(const DdpRank& rank0);
// Backward of layer `layer`: where its gradients go (DDP's buckets or FSDP's flat gradient).
std::string backward_summary(const DdpRank& rank0, int layer);
// GatherParams, FreeParams, ReduceScatter and BroadcastParams. `second_gather`: ZeRO-3's all-gather
// before the backward.
std::string sharding_summary(const DdpRank& rank0, StageKind kind, bool second_gather);

}  // namespace dpv
