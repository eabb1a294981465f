// The sharded strategies' part of `dpv step`'s output (see zero_output.h).
#include "engine/zero/zero_output.h"

#include "engine/error.h"

namespace dpv {

Tensor concat_slices(const std::vector<Tensor>& slices) {
  check(!slices.empty() && slices[0].defined(), "the flat parameter has no slices");
  const int64_t each = slices[0].numel();
  Tensor flat = Tensor::empty({each * static_cast<int64_t>(slices.size())}, slices[0].dtype());  // [L]
  for (size_t r = 0; r < slices.size(); ++r) {
    check(slices[r].defined() && slices[r].numel() == each,
          "rank " + std::to_string(r) + "'s slice of the flat parameter is missing or not " + std::to_string(each) +
              " elements");
    flat.slice0(static_cast<int64_t>(r) * each, static_cast<int64_t>(r + 1) * each).copy_from(slices[r]);
  }
  return flat;
}

Tensor unflatten_entry(const Tensor& flat, const FlatEntry& entry) {
  return flat.slice0(entry.offset, entry.offset + entry.numel).reshape(entry.shape).clone();
}

void add_zero_outputs(DdpStepOutput& out, const std::vector<DdpRankResult>& ranks) {
  const DdpRankResult& r0 = ranks.at(0);
  if (r0.zero_stage == 0) return;
  out.metadata["zero.stage"] = std::to_string(r0.zero_stage);
  if (r0.zero_stage == 1) {
    for (const DdpRankResult& r : ranks)
      for (const auto& [name, t] : r.optim.items()) out.tensors.set("rank" + std::to_string(r.rank) + "/optim/" + name, t);
    out.metadata["zero.partition"] = zero_partition_json(r0.partition);
    return;
  }
  // FSDP: no buckets; the parameters and gradients are the slices put together.
  out.metadata.erase("ddp.buckets");
  std::vector<Tensor> params, grads;
  for (const DdpRankResult& r : ranks) {
    const std::string p = "rank" + std::to_string(r.rank) + "/flat/";
    out.tensors.set(p + "param", r.flat_param);
    if (r.flat_grad.defined()) out.tensors.set(p + "grad", r.flat_grad);
    for (const auto& [state_name, t] : r.flat_state.items()) out.tensors.set(p + state_name, t);
    params.push_back(r.flat_param);
    grads.push_back(r.flat_grad);
  }
  const Tensor full_params = concat_slices(params);
  const bool have_grads = r0.flat_grad.defined();
  const Tensor full_grads = have_grads ? concat_slices(grads) : Tensor();
  for (const FlatEntry& e : r0.flat_layout.entries) {
    out.tensors.set("state/" + e.name, unflatten_entry(full_params, e));
    if (have_grads) out.tensors.set("grad/" + e.name, unflatten_entry(full_grads, e));
  }
  out.metadata["fsdp.flat"] = flat_layout_json(r0.flat_layout);
  out.metadata["fsdp.padded_numel"] = std::to_string(r0.flat_layout.padded_numel);
}

}  // namespace dpv
