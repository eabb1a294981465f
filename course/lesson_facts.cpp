#include "course/lesson_facts.h"

#include <algorithm>

#include "course/timeline_series.h"
#include "engine/data_parallel.h"
#include "engine/ddp/buckets.h"
#include "engine/ddp/ddp.h"
#include "engine/ddp/sampler.h"
#include "engine/model_spec.h"
#include "engine/number_text.h"
#include "engine/optim/optimizer.h"
#include "engine/zero/flat_layout.h"

namespace dpv::course {

namespace {

std::string join(const std::vector<int64_t>& values, const char* separator = ", ") {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? separator : "") + std::to_string(values[i]);
  return out;
}

void model_facts(LessonFacts& f, const RunSpec& spec, const Model& model, const Tensor& input) {
  f.model = spec.model ? "your model" : spec.preset;
  for (const LayerSpec& layer : model.spec().layers) {
    f.has_batchnorm = f.has_batchnorm || is_batchnorm(layer.kind);
    if (layer.kind == LayerKind::Linear) {
      f.out_features = layer.out_features;
      f.last_in_features = layer.in_features;
    }
  }
  f.has_buffers = !model.buffer_decls().empty();
  f.sync_bn = spec.sync_bn && f.has_batchnorm;
  // The model's own shape inference: the output of the whole batch, [N, K].
  const std::vector<Shape> shapes = model.activation_shapes(input.shape());
  if (!shapes.empty()) f.output_shape = shapes.back();
}

void dp_facts(LessonFacts& f, const Iteration& dp) {
  f.chunks = dp.chunks();
  f.replicas = dp.replicas();
  f.idle_devices = f.devices - f.replicas;
  f.bn_breaks_sum = f.has_batchnorm && !f.sync_bn && f.replicas > 1;
  f.loss_whole_batch = true;
  f.loss_rows = f.batch;
}

// `trainer`: the in-process ranks' trainer, whose reducers the bucket facts read (null for a
// strategy without one: those facts keep their defaults).
void ddp_facts(LessonFacts& f, const DdpTrainer* trainer, const DdpIteration& ddp) {
  f.chunks = chunk_sizes(f.batch, f.devices);  // what DataParallel would have made, for contrast
  f.replicas = f.devices;                      // one full model per rank, none idle
  f.per_rank = sampler_num_samples(f.batch, f.devices, /*drop_last=*/false);
  f.padded_total = f.per_rank * f.devices;
  f.repeated = f.padded_total - f.batch;
  if (!ddp.shards().empty()) {
    f.rank0_samples = ddp.shards().front();
    f.last_rank_samples = ddp.shards().back();
  }
  f.bn_per_rank = f.has_batchnorm && !f.sync_bn && f.devices > 1;
  f.loss_whole_batch = false;  // rank 0 prints its own shard's loss; DDP never combines losses
  f.loss_rows = f.per_rank;
  if (trainer == nullptr) return;
  const DdpOptions& options = trainer->options();
  f.broadcast_buffers = options.broadcast_buffers;
  f.bucket_cap_bytes = static_cast<int64_t>(bucket_bytes_cap(options.bucket_cap_mb));
  f.first_bucket_bytes = static_cast<int64_t>(options.first_bucket_bytes);
  // Before Construct the Reducer does not exist yet; it is built with one bucket for everything.
  // FSDP (ZeRO-2/3) has none: it reduce-scatters one flat gradient instead.
  if (options.zero_stage >= 2) return;
  if (trainer->constructed() && trainer->rank(0).has_reducer()) {
    const Reducer& reducer = trainer->rank(0).reducer();
    f.buckets = static_cast<int>(reducer.buckets().buckets.size());
    f.buckets_rebuilt = reducer.rebuilt();
  } else {
    f.buckets = 1;
  }
}

// The optimizer's facts, under DDP and ZeRO: the class and the state it keeps per parameter.
void optimizer_facts(LessonFacts& f, const OptimizerSettings& optimizer) {
  f.optimizer = optimizer_class_name(optimizer.kind);
  for (const std::string& name : optimizer_state_names(optimizer)) {
    if (name == "step") f.optimizer_step_counts = true;  // a counter, not shaped like the parameter
    else f.optimizer_states.push_back(name);
  }
}

// The sharded strategies' facts: rank 0's partition and flat layout once the ranks are built; before
// Construct the same engine functions the ranks will call, on the same model and W.
void zero_facts(LessonFacts& f, const DdpTrainer& trainer) {
  const int world = trainer.world_size();
  const std::vector<ParamExtent> extents = param_extents(trainer.model());
  f.zero_stage = trainer.options().zero_stage;
  f.param_count = static_cast<int>(extents.size());
  for (const ParamExtent& p : extents) f.param_numel += p.numel;
  f.element_bytes = static_cast<int64_t>(dtype_size(trainer.model().dtype()));
  f.allreduce_bytes = f.param_numel * f.element_bytes;
  if (f.zero_stage == 1) {
    const ZeroPartition partition = trainer.constructed() ? trainer.rank(0).partition() : zero1_partition(extents, world);
    f.rank0_owned = partition.at(0);
    for (const ParamExtent& p : extents)
      if (std::find(f.rank0_owned.begin(), f.rank0_owned.end(), p.name) != f.rank0_owned.end()) f.rank0_owned_numel += p.numel;
  }
  if (f.zero_stage < 2) return;
  const FlatLayout layout = trainer.constructed() ? trainer.rank(0).flat_layout() : make_flat_layout(extents, world);
  f.flat_numel = layout.numel;
  f.flat_padded_numel = layout.padded_numel;
  f.shard_numel = layout.shard_numel();
  f.last_shard_padding = layout.shard_numel() - layout.shard_real_numel(world - 1);
  const DivideFactors divide = fsdp_divide_factors(world);
  f.pre_divide = divide.pre;
  f.post_divide = divide.post;
  f.gathers_per_step = f.zero_stage == 3 ? 2 : 1;
  f.flat_bytes = layout.padded_numel * f.element_bytes;
}

}  // namespace

LessonFacts lesson_facts(const RunSpec& spec, const Strategy& strategy, const StrategyIteration& iteration,
                         const Tensor& input, int iteration_number) {
  LessonFacts f;
  f.batch = input.dim(0);
  f.devices = strategy.devices().size();
  f.iteration = iteration_number;
  model_facts(f, spec, strategy.model(), input);
  if (f.output_shape.empty()) f.output_shape = {f.batch, f.out_features};
  if (const auto* dp = dynamic_cast<const Iteration*>(&iteration)) {
    dp_facts(f, *dp);
  } else if (const auto* ddp = dynamic_cast<const DdpIteration*>(&iteration)) {
    f.ddp = true;
    const auto* trainer = dynamic_cast<const DdpTrainer*>(&strategy);
    ddp_facts(f, trainer, *ddp);
    if (trainer != nullptr) {
      optimizer_facts(f, trainer->options().optimizer);
      zero_facts(f, *trainer);
      // FULL_SHARD gathers twice; the plan's second GatherParams is the one before the backward.
      int gathers = 0;
      for (size_t i = 0; i < iteration.plan().size(); ++i)
        if (iteration.plan()[i].kind == StageKind::GatherParams && ++gathers == 2) f.backward_gather_index = static_cast<int>(i);
    }
  }
  f.simulated = strategy.devices().size() > 0 && strategy.devices()[0].kind() == DeviceKind::Cpu;
  f.host_cores = static_cast<int>(host_cpu_count());
  f.shared_cores = f.simulated && f.host_cores > 0 && f.devices > f.host_cores;
  return f;
}

LessonFacts lesson_facts_after(LessonFacts facts, const StageEvent& event) {
  facts.stage_index = event.index;
  facts.stage_collectives = static_cast<int>(event.collectives.size());
  facts.stage_bytes = 0;
  for (const CollectiveReport& report : event.collectives) facts.stage_bytes += static_cast<int64_t>(report.bytes);
  if (!facts.ddp || event.ranks.empty()) return facts;
  const RankState& rank0 = event.ranks.front();
  // Before Construct no rank has built its Reducer (no buckets listed): it will hold one.
  if (!rank0.buckets.empty()) facts.buckets = static_cast<int>(rank0.buckets.size());
  facts.buckets_rebuilt = rank0.buckets_rebuilt;
  return facts;
}

namespace {

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

// The optimizer's and the sharded strategies' facts (ZeRO-1/2/3), appended to the table.
void add_zero_facts(std::vector<NamedFact>& table, const LessonFacts& f) {
  const auto i64 = [](auto v) { return FactValue{static_cast<int64_t>(v)}; };
  const int64_t padding = f.flat_padded_numel - f.flat_numel;
  const int64_t owned = static_cast<int64_t>(f.rank0_owned.size());
  const char* strategy = f.ddp ? strategy_short_name(rank_strategy(f.zero_stage)) : strategy_short_name(StrategyKind::DataParallel);
  std::vector<NamedFact> zero = {
      {"strategy", std::string(strategy), "\"DP\", \"DDP\", \"ZeRO-1\", \"ZeRO-2\" or \"ZeRO-3\""},
      {"optimizer", f.optimizer, "DDP and ZeRO: each rank's torch.optim class, \"SGD\", \"Adam\", \"AdamW\""},
      {"optimizer_states", join_names(f.optimizer_states), "the optimizer's state tensors shaped like a parameter, \"exp_avg, exp_avg_sq\""},
      {"optimizer_state_count", i64(f.optimizer_states.size()), "how many such state tensors per parameter"},
      {"has_optimizer_state", !f.optimizer_states.empty(), "the optimizer keeps state tensors (momentum or Adam's moments)"},
      {"optimizer_step_counts", f.optimizer_step_counts, "Adam/AdamW also keep a one-element step count per parameter"},
      {"param_numel", i64(f.param_numel), "DDP and ZeRO: Ψ, the model's parameter elements"},
      {"param_count", i64(f.param_count), "DDP and ZeRO: the model's parameter tensors"},
      {"element_bytes", i64(f.element_bytes), "bytes per element of the model's dtype"},
      {"allreduce_bytes", i64(f.allreduce_bytes), "DDP's all-reduce of every gradient per step: Ψ × element bytes"},
      {"zero", f.zero_stage > 0, "a sharded strategy: ZeRO-1, 2 or 3"},
      {"zero_stage", i64(f.zero_stage), "the ZeRO stage: 0 (DP, DDP), 1, 2, 3"},
      {"zero1", f.zero_stage == 1, "ZeroRedundancyOptimizer over DDP"},
      {"fsdp", f.zero_stage >= 2, "FSDP: ZeRO-2 (SHARD_GRAD_OP) or ZeRO-3 (FULL_SHARD)"},
      {"full_shard", f.zero_stage == 3, "FSDP FULL_SHARD (ZeRO-3)"},
      {"rank0_owned", join_names(f.rank0_owned), "ZeRO-1: the parameters rank 0 steps, \"0.weight, 1.bias\""},
      {"rank0_owned_count", i64(owned), "ZeRO-1: how many parameters rank 0 steps"},
      {"rank0_owns_one", owned == 1, "ZeRO-1: rank 0 steps exactly one parameter"},
      {"rank0_owns_none", f.zero_stage == 1 && owned == 0, "ZeRO-1: rank 0 steps no parameter (fewer parameters than ranks)"},
      {"rank0_owned_numel", i64(f.rank0_owned_numel), "ZeRO-1: the elements of rank 0's parameters"},
      {"broadcasts_per_step", i64(f.zero_stage == 1 ? f.param_count : 0), "ZeRO-1: one broadcast per parameter after each step"},
      {"flat_numel", i64(f.flat_numel), "FSDP: the parameters' elements in the flat parameter"},
      {"flat_padded_numel", i64(f.flat_padded_numel), "FSDP: L, the flat parameter rounded up to a multiple of W"},
      {"flat_padding", i64(padding), "FSDP: zeros padded at the end (L − Ψ)"},
      {"flat_padded", padding > 0, "FSDP: the flat parameter needed padding"},
      {"one_padding", padding == 1, "FSDP: exactly one padding zero"},
      {"shard_numel", i64(f.shard_numel), "FSDP: L / W, each rank's slice"},
      {"last_shard_padding", i64(f.last_shard_padding), "FSDP: padding zeros in the last rank's slice"},
      {"one_last_shard_padding", f.last_shard_padding == 1, "FSDP: exactly one padding zero in the last rank's slice"},
      {"pre_divide", python_float(f.pre_divide), "FSDP: the gradient is divided by this before the reduce-scatter, \"2.0\""},
      {"post_divide", python_float(f.post_divide), "FSDP: and by this after it (pre × post = W), \"1.5\""},
      {"divides_before", f.pre_divide > 1, "FSDP: the pre-divide factor is more than 1"},
      {"gathers_per_step", i64(f.gathers_per_step), "FSDP: all-gathers per iteration (SHARD_GRAD_OP 1, FULL_SHARD 2)"},
      {"flat_bytes", i64(f.flat_bytes), "FSDP: one all-gather's or reduce-scatter's size, L × element bytes"},
      {"step_gather_bytes", i64(f.gathers_per_step * f.flat_bytes), "FSDP: bytes all-gathered per iteration (nccl-tests size)"},
      {"gather_for_backward", f.backward_gather_index >= 0 && f.stage_index == f.backward_gather_index,
       "ZeRO-3: the stage just shown is the all-gather before the backward"},
      {"stage_collectives", i64(f.stage_collectives), "collectives rank 0 ran in the stage just shown"},
      {"one_collective", f.stage_collectives == 1, "the stage just shown ran exactly one collective"},
      {"stage_bytes", i64(f.stage_bytes), "their bytes, summed (nccl-tests size)"},
  };
  table.insert(table.end(), std::make_move_iterator(zero.begin()), std::make_move_iterator(zero.end()));
}

}  // namespace

std::vector<NamedFact> fact_table(const LessonFacts& f) {
  const auto i64 = [](auto v) { return FactValue{static_cast<int64_t>(v)}; };
  std::string idle;  // "GPU 3", "GPUs 5–7"
  if (f.idle_devices == 1) idle = "GPU " + std::to_string(f.replicas);
  if (f.idle_devices > 1) idle = "GPUs " + std::to_string(f.replicas) + "–" + std::to_string(f.devices - 1);
  std::string chunk_shapes;  // each replica's output, for the Gather example
  for (size_t i = 0; i < f.chunks.size(); ++i)
    chunk_shapes += (i ? ", " : "") + std::string("[") + std::to_string(f.chunks[i]) + ", " + std::to_string(f.out_features) + "]";
  std::vector<int64_t> repeated_samples;
  for (int64_t i = 0; i < f.repeated; ++i) repeated_samples.push_back(i);
  std::vector<NamedFact> table = {
      {"ddp", f.ddp, "the run runs DDP's ranks (DistributedDataParallel, or ZeRO on them; else nn.DataParallel)"},
      {"batch", i64(f.batch), "rows of the global batch"},
      {"devices", i64(f.devices), "devices in the set (DDP: the world size W)"},
      {"one_device", f.devices == 1, "the set has one device"},
      {"chunks", join(f.chunks), "torch.chunk's sizes of the batch, \"3, 3, 3, 1\" (DDP: what DataParallel would make)"},
      {"first_chunk", i64(f.chunks.empty() ? 0 : f.chunks.front()), "the first chunk's rows"},
      {"last_chunk", i64(f.chunks.empty() ? 0 : f.chunks.back()), "the last chunk's rows"},
      {"uneven_chunks", f.chunks.size() > 1 && f.chunks.front() != f.chunks.back(), "the last chunk is smaller"},
      {"replicas", i64(f.replicas), "replicas (DataParallel: chunks; DDP: ranks)"},
      {"multi_replica", f.replicas > 1, "more than one replica computes"},
      {"has_idle", f.idle_devices > 0, "DataParallel leaves devices without a chunk"},
      {"idle_count", i64(f.idle_devices), "how many devices get no chunk"},
      {"one_idle", f.idle_devices == 1, "exactly one device gets no chunk"},
      {"idle", idle, "the idle devices, \"GPU 3\" or \"GPUs 5–7\" (empty when none)"},
      {"per_rank", i64(f.per_rank), "DDP: samples per rank, ceil(batch / W)"},
      {"padded", f.repeated > 0, "DDP: DistributedSampler pads the batch"},
      {"padded_total", i64(f.padded_total), "DDP: per_rank × W"},
      {"repeated", i64(f.repeated), "DDP: samples seen twice (padded_total − batch)"},
      {"one_repeat", f.repeated == 1, "DDP: exactly one sample is repeated"},
      {"repeated_samples", join(repeated_samples), "DDP: the repeated samples, \"0, 1\""},
      {"rank0_samples", join(f.rank0_samples), "DDP: rank 0's sample indices, \"0, 4, 8\""},
      {"last_rank_samples", join(f.last_rank_samples), "DDP: the last rank's sample indices"},
      {"last_rank", i64(f.devices - 1), "the last rank's (or device's) index"},
      {"model", f.model, "the preset's name, or \"your model\""},
      {"has_batchnorm", f.has_batchnorm, "the model has BatchNorm layers"},
      {"sync_bn", f.sync_bn, "BatchNorm computes the whole batch's statistics (SyncBatchNorm)"},
      {"bn_breaks_sum", f.bn_breaks_sum, "DataParallel: BatchNorm's per-chunk statistics make the summed gradient differ from one device's"},
      {"bn_per_rank", f.bn_per_rank, "DDP: each rank's BatchNorm uses its own shard's statistics"},
      {"out_features", i64(f.out_features), "the last Linear layer's out_features"},
      {"last_in_features", i64(f.last_in_features), "the last Linear layer's in_features"},
      {"chunk_output_shapes", chunk_shapes, "each replica's output shape, \"[3, 10], [3, 10], [2, 10]\""},
      {"output_shape", shape_str(f.output_shape), "the gathered output's shape, \"[8, 10]\""},
      {"loss_whole_batch", f.loss_whole_batch, "the loss shown is the whole batch's mean (DataParallel)"},
      {"loss_rows", i64(f.loss_rows), "rows the loss shown averages over"},
      {"iteration", i64(f.iteration), "the iteration's number, from 1"},
      {"first_iteration", f.iteration == 1, "the first iteration after (re)configuring"},
      {"second_iteration", f.iteration == 2, "the second iteration (DDP rebuilds its buckets at its forward)"},
      {"broadcast_buffers", f.broadcast_buffers, "DDP: broadcast_buffers=True"},
      {"has_buffers", f.has_buffers, "the model has buffers (BatchNorm running statistics)"},
      {"broadcasts_buffers", f.ddp && f.broadcast_buffers && f.has_buffers, "DDP broadcasts rank 0's buffers before this forward"},
      {"buckets", i64(f.buckets), "DDP: buckets rank 0's reducer holds now"},
      {"several_buckets", f.buckets > 1, "DDP: more than one bucket now"},
      {"buckets_rebuilt", f.buckets_rebuilt, "DDP: the one rebuild in gradient-ready order has happened"},
      {"bucket_cap_bytes", i64(f.bucket_cap_bytes), "DDP: bucket_cap_mb in bytes"},
      {"first_bucket_bytes", i64(f.first_bucket_bytes), "DDP: the first rebuilt bucket's limit in bytes"},
      {"simulated", f.simulated, "the devices are simulated on the CPU"},
      {"host_cores", i64(f.host_cores), "CPU cores this process may use"},
      {"shared_cores", f.shared_cores, "more simulated devices than cores: they take turns"},
  };
  add_zero_facts(table, f);
  return table;
}

}  // namespace dpv::course
