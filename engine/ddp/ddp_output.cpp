// `dpv step --ddp`'s output tensors and metadata from the per-rank results.
#include "engine/ddp/ddp_output.h"

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/zero/zero_output.h"

namespace dpv {

std::string buckets_json(const std::vector<std::vector<std::string>>& buckets) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& b : buckets) j.push_back(b);
  return j.dump();
}

DdpStepOutput ddp_step_output(const std::vector<DdpRankResult>& ranks, DType dtype) {
  check(!ranks.empty(), "ddp_step_output: no ranks");
  DdpStepOutput out;
  const DdpRankResult& r0 = ranks[0];
  for (const auto& [name, t] : r0.state.items()) out.tensors.set("state/" + name, t);
  for (const auto& [name, g] : r0.grads.items()) out.tensors.set("grad/" + name, g);
  double sum = 0;
  for (const auto& r : ranks) sum += r.loss;
  out.tensors.set("loss", Tensor::from_doubles({}, dtype, {sum / static_cast<double>(ranks.size())}));
  for (const auto& r : ranks) {
    const std::string p = "rank" + std::to_string(r.rank) + "/";
    out.tensors.set(p + "output", r.output);
    out.tensors.set(p + "loss", Tensor::from_doubles({}, dtype, {r.loss}));
    for (const auto& [name, t] : r.state.items())
      if (r0.grads.find(name) == nullptr && !r.grads.contains(name)) out.tensors.set(p + "state/" + name, t);
  }
  for (const auto& r : ranks) {
    for (const BatchNormStats& s : r.batchnorm) {
      if (s.device < 0 && r.rank != 0) continue;  // the merged statistics are equal on every rank
      const std::string where = s.device < 0 ? "global" : "dev" + std::to_string(s.device);
      const std::string key = "stats/" + std::to_string(s.layer) + "/" + where + "/";
      const Shape c{static_cast<int64_t>(s.mean.size())};
      out.tensors.set(key + "mean", Tensor::from_doubles(c, dtype, s.mean));
      out.tensors.set(key + "var", Tensor::from_doubles(c, dtype, s.var));
    }
  }
  out.metadata["ddp.buckets"] = buckets_json(r0.buckets);
  out.metadata["world_size"] = std::to_string(ranks.size());
  add_zero_outputs(out, ranks);  // the sharded strategies' slices, optimizer state and layout
  return out;
}

}  // namespace dpv
