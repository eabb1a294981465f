#pragma once
// What `dpv step` and `dpv step --ddp` share: their options and how they read the model's
// starting state and the batch.
#include <cstdint>
#include <string>

#include "engine/ddp/ddp_rank.h"
#include "engine/model.h"
#include "engine/run/run_spec.h"
#include "engine/tensor_map.h"

namespace dpv::cli {

struct StepOptions {
  // The files: model spec, starting state, batch, and where the result goes.
  std::string model, state, batch, out;
  // --devices, --sync-bn, --lr, --momentum, --weight-decay, --seed and DDP's --bucket-cap-mb go
  // straight in; the strategy and broadcast_buffers are set from --ddp and --no-broadcast-buffers
  // once the command line is read (finish_step_options).
  RunSpec run;
  bool devices_given = false;  // --devices was on the command line (a launched DDP rank may go without)
  int steps = 1;
  // --ddp and the flag only DDP has; --zero S (1, 2 or 3; 0: not given), DDP's ranks and options too.
  bool ddp = false;
  bool no_broadcast_buffers = false;
  int zero = 0;
  CommHookOptions comm_hook;  // --comm-hook and the --powersgd-* flags (cli/comm_hook_options.h)
};

// The DDP ranks' options: o.run's, with the communication hook.
DdpOptions step_ddp_options(const StepOptions& o);

// Completes o.run from the flags read into other fields: the strategy (--ddp, --zero) and
// broadcast_buffers (--no-broadcast-buffers).
void finish_step_options(StepOptions& o);

// A state file may be a plain state dict ("0.weight") or the output of an earlier `dpv step`
// ("state/0.weight"); the latter is read with its prefix removed so steps can be chained.
// Without a file, the model's initial state from `seed`.
TensorMap load_step_state(const Model& model, const std::string& path, uint64_t seed);

struct StepBatch {
  Tensor input, target;
};
// 'input' and int64 'target' from a safetensors file (PyTorch's words for a non-int64 target).
StepBatch load_step_batch(const std::string& path);

// The rows of the batch (0 for a 0-dim input, which the step itself refuses in PyTorch's words).
int64_t step_batch_rows(const Tensor& input);
// One sample's input shape: the batch's with 1 row ([1, ...]).
Shape step_sample_shape(const Tensor& input);
// How a memory message names the batch: "--batch FILE (N samples)".
std::string step_batch_label(const std::string& path, const Tensor& input);

// DDP's `dpv step --ddp` and the sharded `dpv step --zero S` (cli/cmd_step_ddp.cpp).
void run_step_ddp(const StepOptions& o);

}  // namespace dpv::cli
