// Reading `dpv step`'s starting state and batch.
#include "cli/step_inputs.h"

#include "engine/error.h"
#include "engine/io/safetensors.h"

namespace dpv::cli {

void finish_step_options(StepOptions& o) {
  if (o.zero > 0)
    o.run.strategy = rank_strategy(o.zero);
  else
    o.run.strategy = o.ddp ? StrategyKind::DistributedDataParallel : StrategyKind::DataParallel;
  o.run.ddp.broadcast_buffers = !o.no_broadcast_buffers;
}

DdpOptions step_ddp_options(const StepOptions& o) {
  DdpOptions options = ddp_options(o.run);
  options.comm_hook = o.comm_hook;
  return options;
}

TensorMap load_step_state(const Model& model, const std::string& path, uint64_t seed) {
  if (path.empty()) return model.initial_state(seed);
  TensorMap file = load_safetensors(path);
  const std::string prefix = "state/";
  TensorMap stripped;
  for (const auto& [name, t] : file.items()) {
    if (name.rfind(prefix, 0) == 0) stripped.set(name.substr(prefix.size()), t);
  }
  return stripped.empty() ? file : stripped;
}

StepBatch load_step_batch(const std::string& path) {
  const std::string what = "the batch file '" + path + "'";
  TensorMap batch = load_safetensors(path);
  StepBatch b{batch.at("input", what), batch.at("target", what)};
  check(b.target.dtype() == DType::Int64,
        "expected scalar type Long but found " + std::string(dtype_torch_name(b.target.dtype())) + " for 'target' in " +
            what + " (cross_entropy takes int64 class indices)");
  return b;
}

int64_t step_batch_rows(const Tensor& input) { return input.ndim() > 0 ? input.dim(0) : 0; }

Shape step_sample_shape(const Tensor& input) {
  Shape one = input.shape();
  if (!one.empty()) one[0] = 1;
  return one;
}

std::string step_batch_label(const std::string& path, const Tensor& input) {
  return "--batch " + path + " (" + std::to_string(step_batch_rows(input)) + " samples)";
}

}  // namespace dpv::cli
