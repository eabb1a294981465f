#pragma once
// Before a launched DDP job's first collective, every rank compares its DistributedDataParallel
// configuration with rank 0's through the store: a rank started with other options (one without
// --no-broadcast-buffers, another bucket size, SyncBatchNorm on one rank only) or another number
// of steps would otherwise reach a collective the others never run and end in
// Gloo's raw "enforce fail" or a timeout. PyTorch's DDP checks the parameter shapes the same way
// (_verify_param_shape_across_processes); the engine's DdpRank does that one, with PyTorch's message.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/ddp/ddp_rank.h"
#include "engine/process_groups/multiprocess/init_process_group.h"

namespace dpv::cli {

// The facts every rank must share, by name, in order: "broadcast_buffers" -> "false", ...
using DdpConfig = std::vector<std::pair<std::string, std::string>>;
DdpConfig ddp_config_of(const DdpOptions& options, int64_t steps);

// Publishes this rank's configuration and reads every rank's; throws dpv::Error (RuntimeError)
// naming the first differing rank, the setting and both values, the same message on every rank.
void verify_same_ddp_config(dist::DistSession& session, const DdpConfig& mine);

}  // namespace dpv::cli
