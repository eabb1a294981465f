#pragma once
// What `dpv step --zero S` writes beyond `dpv step --ddp`'s output (engine/ddp/ddp_output.h), from
// every rank's result:
//   S = 1: rank<r>/optim/<param>/<state> for the parameters rank r owns (momentum_buffer; exp_avg,
//          exp_avg_sq), and __metadata__ zero.partition (every rank's parameter names, in order)
//   S = 2, 3: rank<r>/flat/param and rank<r>/flat/grad ([L/W]) and rank<r>/flat/<state>; state/<param>
//          and grad/<param> put together from the slices; __metadata__ fsdp.flat ([name, offset,
//          numel] in flat order) and fsdp.padded_numel (L)
#include <vector>

#include "engine/ddp/ddp_output.h"

namespace dpv {

void add_zero_outputs(DdpStepOutput& out, const std::vector<DdpRankResult>& ranks);

// The full flat tensor [L] from every rank's slice (rank order), and one parameter of it as its
// own shape: how the sharded state becomes the model's state dict again.
Tensor concat_slices(const std::vector<Tensor>& slices);
Tensor unflatten_entry(const Tensor& flat, const FlatEntry& entry);

}  // namespace dpv
