#include "gui/ddp/zero_code.h"

#include <algorithm>
#include <string>

#include "course/sample_program.h"
#include "engine/error.h"
#include "engine/number_text.h"

namespace gui {

namespace {

using K = dpv::StageKind;
using Lines = std::vector<dpv::course::ProgramLine>;

void add(Lines& out, std::string text, std::vector<K> stages = {}) { out.push_back({std::move(text), std::move(stages), -1}); }

Lines modelLines(const std::string& preset) {
  try {
    return dpv::course::model_definition(preset, dpv::course::ModelPlacement::AsBuilt);
  } catch (const dpv::Error&) {  // an unknown preset shows the seed's own model, as userCodeLines does
    return dpv::course::model_definition(dpv::course::kSamplePreset, dpv::course::ModelPlacement::AsBuilt);
  }
}

}  // namespace

QVector<CodeLine> zeroScriptLines(const AppSettings& settings, int ranks, qint64 rows) {
  const int stage = dpv::zero_stage(settings.strategy);
  const int64_t world = std::max(1, ranks);
  const int64_t perRank = (rows + world - 1) / world;
  const std::string lr = dpv::python_float(settings.learningRate);
  Lines out;
  add(out, "# torchrun --nproc_per_node=" + std::to_string(world) + " train.py  (one process per device)");
  add(out, "import torch");
  add(out, "import torch.nn as nn");
  add(out, "import torch.distributed as dist");
  if (stage == 1) {
    add(out, "from torch.distributed.optim import ZeroRedundancyOptimizer");
    add(out, "from torch.nn.parallel import DistributedDataParallel as DDP");
  } else {
    add(out, "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy");
  }
  add(out, "from torch.utils.data import DataLoader, DistributedSampler");
  add(out, "");
  add(out, "dist.init_process_group(\"gloo\")  # RANK, WORLD_SIZE from torchrun");
  add(out, "rank = dist.get_rank()");
  for (auto& line : modelLines(settings.preset.toStdString())) out.push_back(std::move(line));
  if (stage == 1) {
    add(out, "model = DDP(model)  # rank 0's state to all; gradients all-reduced in buckets", {K::Construct});
    add(out, "optimizer = ZeroRedundancyOptimizer(model.parameters(),  # each rank owns a share", {K::Construct});
    add(out, "    optimizer_class=torch.optim.SGD, lr=" + lr + ")");
  } else {
    const char* strategy = stage == 2 ? "SHARD_GRAD_OP" : "FULL_SHARD";
    add(out, "model = FSDP(model, sharding_strategy=ShardingStrategy." + std::string(strategy) + ")  # one flat parameter",
        {K::Construct});
    add(out, "optimizer = torch.optim.SGD(model.parameters(), lr=" + lr + ")  # this rank's slice only");
  }
  add(out, "criterion = nn.CrossEntropyLoss()");
  add(out, "");
  add(out, "sampler = DistributedSampler(dataset, shuffle=False)", {K::Sample});
  add(out, "loader = DataLoader(dataset, batch_size=" + std::to_string(perRank) + ", sampler=sampler)");
  add(out, "for inputs, labels in loader:  # this rank's strided shard", {K::Sample});
  if (stage == 1) {
    add(out, "    outputs = model(inputs)", {K::BroadcastBuffers, K::Forward});
  } else {
    add(out, "    outputs = model(inputs)  # all-gathers the slices first", {K::BroadcastBuffers, K::GatherParams, K::Forward,
                                                                            K::FreeParams});
  }
  add(out, "    loss = criterion(outputs, labels)  # this rank's own loss", {K::Loss});
  add(out, "    optimizer.zero_grad()");
  if (stage == 1) add(out, "    loss.backward()  # DDP's buckets all-reduce", {K::Backward, K::Finalize});
  else add(out, "    loss.backward()  # then the gradients are reduce-scattered", {K::GatherParams, K::Backward, K::ReduceScatter});
  if (stage == 1) add(out, "    optimizer.step()  # own parameters, then broadcast", {K::Step, K::BroadcastParams});
  else add(out, "    optimizer.step()  # only this rank's slice", {K::Step});
  return codeLinesOf(out);
}

QVector<CodeLine> zeroSourceLines(dpv::StrategyKind kind) {
  Lines out;
  if (dpv::zero_stage(kind) == 1) {
    add(out, "# torch/distributed/optim/zero_redundancy_optimizer.py (PyTorch 1.13, abridged)");
    add(out, "# _partition_parameters: largest first, to the rank with the fewest elements", {K::Construct});
    add(out, "params_sorted = sorted(param_group[\"params\"], key=lambda t: t.numel(), reverse=True)", {K::Construct});
    add(out, "rank = sizes.index(min(sizes)); param_lists[rank].append(param)", {K::Construct});
    add(out, "");
    add(out, "# ZeroRedundancyOptimizer.step");
    add(out, "loss = self.optim.step(closure=closure, **kwargs)  # own parameters only", {K::Step});
    add(out, "self._sync_params()", {K::BroadcastParams});
    add(out, "# _sync_params: each parameter from the rank that owns it");
    add(out, "dist.broadcast(tensor=param.data, src=self._param_to_rank[param], ...)", {K::BroadcastParams});
    return codeLinesOf(out);
  }
  const bool full = kind == dpv::StrategyKind::Zero3;
  add(out, "# torch/distributed/fsdp/flat_param.py, fully_sharded_data_parallel.py (PyTorch 1.13, abridged)");
  add(out, "# FlatParamHandle: every parameter flattened into one, padded to a multiple of W", {K::Construct});
  add(out, "flat_param = torch.cat([p.flatten() for p in params] + [zeros(padding)])", {K::Construct});
  add(out, "local_shard = flat_param.chunk(world_size)[rank].clone()  # this rank's slice", {K::Construct});
  add(out, "");
  add(out, "# FSDP.forward -> _pre_forward -> _unshard", {K::GatherParams});
  add(out, "dist._all_gather_base(padded_unsharded_flat_param, local_shard)", {K::GatherParams});
  add(out, "outputs = self._fsdp_wrapped_module(*args, **kwargs)", {K::Forward});
  if (full) add(out, "_post_forward -> _reshard: free the full parameter (FULL_SHARD)", {K::FreeParams});
  add(out, "");
  add(out, "# backward: _pre_backward_hook gathers again under FULL_SHARD", {K::GatherParams});
  add(out, "# _post_backward_hook, once the flat gradient is complete:", {K::Backward});
  add(out, "flat_param.grad.div_(self._gradient_predivide_factor)", {K::ReduceScatter});
  add(out, "dist._reduce_scatter_base(new_sharded_grad, padded_unsharded_grad)", {K::ReduceScatter});
  add(out, "new_sharded_grad.div_(self._gradient_postdivide_factor)", {K::ReduceScatter});
  add(out, "_reshard: keep only local_shard", {K::ReduceScatter});
  add(out, "");
  add(out, "# torch/optim/sgd.py, SGD.step: on the slice only", {K::Step});
  add(out, "local_shard.add_(sharded_grad, alpha=-lr)", {K::Step});
  return codeLinesOf(out);
}

}  // namespace gui
