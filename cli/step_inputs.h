#pragma once
// What `dpv step` and `dpv step --ddp` share: their options and how they read the model's
// starting state and the batch.
#include <cstdint>
#include <string>

#include "engine/model.h"
#include "engine/tensor_map.h"

namespace dpv::cli {

struct StepOptions {
  std::string model, state, batch, devices, out;
  bool devices_given = false;  // --devices was on the command line (a launched DDP rank may go without)
  bool sync_bn = false;
  double lr = 0.01, momentum = 0.0, weight_decay = 0.0;
  int steps = 1;
  uint64_t seed = 0;
  // --ddp and the options only DDP has.
  bool ddp = false;
  bool no_broadcast_buffers = false;
  double bucket_cap_mb = 25.0;
};

// A state file may be a plain state dict ("0.weight") or the output of an earlier `dpv step`
// ("state/0.weight"); the latter is read with its prefix removed so steps can be chained.
// Without a file, the model's initial state from `seed`.
TensorMap load_step_state(const Model& model, const std::string& path, uint64_t seed);

struct StepBatch {
  Tensor input, target;
};
// 'input' and int64 'target' from a safetensors file (PyTorch's words for a non-int64 target).
StepBatch load_step_batch(const std::string& path);

// DDP's `dpv step --ddp` (cli/cmd_step_ddp.cpp).
void run_step_ddp(const StepOptions& o);

}  // namespace dpv::cli
