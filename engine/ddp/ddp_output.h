#pragma once
// The one assembly of `dpv step --ddp`'s output from every rank's result (the in-process
// driver passes its ranks' results; a launched run gathers them to rank 0 first):
//   state/<name>                  rank 0's state dict after the last step
//   grad/<param>                  the averaged gradients of the last step
//   loss                          0-dim: the mean of the ranks' losses of the last step
//   rank<r>/output, rank<r>/loss  each rank's output [n_r, K] and loss (0-dim)
//   rank<r>/state/<buffer>        each rank's buffers after the last step
//   stats/<i>/dev<r>/{mean,var}   BatchNorm layer i's batch statistics on rank r (biased variance)
//   stats/<i>/global/{mean,var}   with SyncBatchNorm: the merged statistics
// and in __metadata__ "ddp.buckets": a JSON list of buckets (bucket 0 first), each a list of
// parameter names, as used in the last step.
#include <map>
#include <string>
#include <vector>

#include "engine/ddp/ddp_rank.h"

namespace dpv {

struct DdpStepOutput {
  TensorMap tensors;
  std::map<std::string, std::string> metadata;
};

DdpStepOutput ddp_step_output(const std::vector<DdpRankResult>& ranks, DType dtype);

// ["a","b"] lists as JSON: [["5.bias","5.weight"],["1.weight"]].
std::string buckets_json(const std::vector<std::vector<std::string>>& buckets);

}  // namespace dpv
