#pragma once
// `dpv step --ddp`'s communication hook flags (DistributedDataParallel.register_comm_hook):
//   --comm-hook allreduce|fp16|bf16|powersgd
//   --powersgd-rank N, --powersgd-start-iter N, --powersgd-min-compression-rate X,
//   --powersgd-no-error-feedback, --powersgd-no-warm-start, --powersgd-seed N   (PowerSGDState)
// A PowerSGD flag needs --comm-hook powersgd, a hook needs --ddp (not --zero): refused as command
// line errors, before anything runs.
#include <functional>

#include <CLI/CLI.hpp>

#include "engine/ddp/comm_hooks/comm_hook.h"

namespace dpv::cli {

// Adds the flags to `sub`, writing into `hook` (which must outlive the parse). Returns the finisher
// the subcommand's callback calls with whether --ddp was given and the --zero stage (0: none).
std::function<void(bool ddp, int zero)> add_comm_hook_options(CLI::App* sub, CommHookOptions& hook);

}  // namespace dpv::cli
