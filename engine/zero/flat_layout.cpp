// ZeRO-1's partition and FSDP's flat layout (see flat_layout.h).
#include "engine/zero/flat_layout.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/model.h"

namespace dpv {

std::vector<ParamExtent> param_extents(const Model& model) {
  std::vector<ParamExtent> extents;
  for (const auto& d : model.parameter_decls()) extents.push_back({d.name, d.shape, shape_numel(d.shape)});
  return extents;
}

ZeroPartition zero1_partition(const std::vector<ParamExtent>& params, int world) {
  check(world >= 1, "ZeRO needs at least one rank, got " + std::to_string(world));
  std::vector<size_t> order(params.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return params[a].numel > params[b].numel; });
  ZeroPartition partition(static_cast<size_t>(world));
  std::vector<int64_t> assigned(static_cast<size_t>(world), 0);  // elements per rank so far
  for (size_t index : order) {
    // _get_min_index: the first rank with the fewest elements.
    const size_t rank = static_cast<size_t>(std::min_element(assigned.begin(), assigned.end()) - assigned.begin());
    partition[rank].push_back(params[index].name);
    assigned[rank] += params[index].numel;
  }
  return partition;
}

std::string zero_partition_json(const ZeroPartition& partition) { return nlohmann::json(partition).dump(); }

int64_t FlatLayout::shard_real_numel(int rank) const {
  const int64_t begin = shard_begin(rank), end = begin + shard_numel();
  return std::max<int64_t>(0, std::min(end, numel) - begin);
}

FlatLayout make_flat_layout(const std::vector<ParamExtent>& params, int world) {
  check(world >= 1, "FSDP needs at least one rank, got " + std::to_string(world));
  FlatLayout layout;
  layout.world = world;
  for (const ParamExtent& p : params) {
    layout.entries.push_back({p.name, layout.numel, p.numel, p.shape});
    layout.numel += p.numel;
  }
  layout.padded_numel = (layout.numel + world - 1) / world * world;
  return layout;
}

std::string flat_layout_json(const FlatLayout& layout) {
  nlohmann::json list = nlohmann::json::array();
  for (const FlatEntry& e : layout.entries) list.push_back({e.name, e.offset, e.numel});
  return list.dump();
}

DivideFactors fsdp_divide_factors(int world) {
  int factor = 1;
  while (world % factor == 0 && world / factor > factor) factor *= 2;
  return {static_cast<double>(factor), static_cast<double>(world) / factor};
}

}  // namespace dpv
