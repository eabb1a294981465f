#pragma once
// How the sharded strategies split a model across W ranks (PyTorch 1.13):
//   - ZeRO-1 (torch.distributed.optim.ZeroRedundancyOptimizer): whole parameters, partitioned by
//     _partition_parameters' greedy rule: sorted by element count, largest first (a stable sort, so
//     equal sizes keep model order), each to the rank with the fewest elements so far (the lowest
//     such rank).
//   - ZeRO-2 and ZeRO-3 (FSDP's SHARD_GRAD_OP and FULL_SHARD, the whole model as one unit): one flat
//     parameter, every parameter flattened in model (state-dict) order and zero-padded to a
//     multiple of W; rank r owns the contiguous slice [r*L/W, (r+1)*L/W).
// Plain values: the engine, the outputs, the app and the lessons all read the same layout.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace dpv {

class Model;

// A parameter as the partition and the flat layout see it: its name, shape and element count.
struct ParamExtent {
  std::string name;  // "0.weight"
  Shape shape;
  int64_t numel = 0;
};

// The model's parameters in model (state-dict) order, as the partition and the layout take them.
std::vector<ParamExtent> param_extents(const Model& model);

// ZeroRedundancyOptimizer's partition: for each rank, the names of the parameters it steps, in the
// order PyTorch assigns them (largest first).
using ZeroPartition = std::vector<std::vector<std::string>>;
ZeroPartition zero1_partition(const std::vector<ParamExtent>& params, int world);
// [["2.weight","0.weight"],["0.bias"]]: the `zero.partition` metadata of `dpv step --zero 1`.
std::string zero_partition_json(const ZeroPartition& partition);

struct FlatEntry {
  std::string name;
  int64_t offset = 0;  // first element in the flat parameter
  int64_t numel = 0;
  Shape shape;
};

struct FlatLayout {
  std::vector<FlatEntry> entries;  // in model order, back to back from offset 0
  int64_t numel = 0;               // the parameters' elements (sum of entries' numel)
  int64_t padded_numel = 0;        // L: numel rounded up to a multiple of world
  int world = 1;
  int64_t shard_numel() const { return padded_numel / world; }          // L / W
  int64_t padding() const { return padded_numel - numel; }              // zeros at the end
  int64_t shard_begin(int rank) const { return shard_numel() * rank; }  // rank's first element
  // Elements of the real parameters (not padding) in rank's slice.
  int64_t shard_real_numel(int rank) const;
};
FlatLayout make_flat_layout(const std::vector<ParamExtent>& params, int world);
// [["0.weight",0,12],["0.bias",12,3]]: the `fsdp.flat` metadata of `dpv step --zero 2|3`.
std::string flat_layout_json(const FlatLayout& layout);

// FSDP's default gradient averaging (_get_gradient_predivide_factor): divide by `pre` before the
// reduce-scatter and by `post` after it, pre * post = W, to keep sums of many ranks from
// overflowing in low precision. W=2: 2, 1; W=4: 2, 2; W=8: 4, 2.
struct DivideFactors {
  double pre = 1;
  double post = 1;
};
DivideFactors fsdp_divide_factors(int world);

}  // namespace dpv
