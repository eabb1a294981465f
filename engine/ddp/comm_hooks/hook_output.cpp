#include "engine/ddp/comm_hooks/hook_output.h"

#include <string>

#include "engine/ddp/comm_hooks/powersgd.h"

namespace dpv {
namespace {

Tensor float_tensor(const std::vector<float>& values) {
  std::vector<double> wide(values.begin(), values.end());
  return Tensor::from_doubles({static_cast<int64_t>(values.size())}, DType::Float32, wide);
}

}  // namespace

void add_comm_hook_bytes(TensorMap& out, const std::vector<BucketRun>& rank0_runs) {
  std::vector<int64_t> sent, uncompressed;
  for (const BucketRun& run : rank0_runs) {
    sent.push_back(static_cast<int64_t>(run.hook.bytes_sent));
    uncompressed.push_back(static_cast<int64_t>(run.hook.bytes_uncompressed));
  }
  const Shape shape{static_cast<int64_t>(sent.size())};
  out.set("comm_hook/bytes_sent", Tensor::from_int64(shape, sent));
  out.set("comm_hook/bytes_uncompressed", Tensor::from_int64(shape, uncompressed));
}

std::string comm_hook_words(CommHookKind kind, const std::vector<BucketRun>& rank0_runs) {
  if (kind == CommHookKind::None) return "";
  size_t sent = 0, uncompressed = 0;
  for (const BucketRun& run : rank0_runs) {
    sent += run.hook.bytes_sent;
    uncompressed += run.hook.bytes_uncompressed;
  }
  return std::string(", ") + comm_hook_name(kind) + " sent " + std::to_string(sent) + " of " +
         std::to_string(uncompressed) + " bytes";
}

void add_comm_hook_state(TensorMap& out, const CommHook& hook, int rank) {
  const auto* powersgd = dynamic_cast<const PowerSgdHook*>(&hook);
  if (!powersgd) return;  // the default hooks keep no state
  const std::string prefix = "rank" + std::to_string(rank) + "/powersgd/";
  out.set(prefix + "iter", Tensor::from_int64({}, {powersgd->iteration()}));
  for (const auto& [b, state] : powersgd->buckets()) {
    const std::string bucket = std::to_string(b);
    if (!state.error.empty()) out.set(prefix + "error/" + bucket, float_tensor(state.error));
    if (!state.p.empty()) out.set(prefix + "p/" + bucket, float_tensor(state.p));
    if (!state.q.empty()) out.set(prefix + "q/" + bucket, float_tensor(state.q));
  }
}

}  // namespace dpv
