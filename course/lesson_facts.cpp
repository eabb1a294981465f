#include "course/lesson_facts.h"

#include <algorithm>

#include "course/timeline_series.h"
#include "engine/data_parallel.h"
#include "engine/ddp/buckets.h"
#include "engine/ddp/ddp.h"
#include "engine/ddp/sampler.h"
#include "engine/model_spec.h"

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
  if (trainer->constructed()) {
    const Reducer& reducer = trainer->rank(0).reducer();
    f.buckets = static_cast<int>(reducer.buckets().buckets.size());
    f.buckets_rebuilt = reducer.rebuilt();
  } else {
    f.buckets = 1;
  }
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
    ddp_facts(f, dynamic_cast<const DdpTrainer*>(&strategy), *ddp);
  }
  f.simulated = strategy.devices().size() > 0 && strategy.devices()[0].kind() == DeviceKind::Cpu;
  f.host_cores = static_cast<int>(host_cpu_count());
  f.shared_cores = f.simulated && f.host_cores > 0 && f.devices > f.host_cores;
  return f;
}

LessonFacts lesson_facts_after(LessonFacts facts, const StageEvent& event) {
  if (!facts.ddp || event.ranks.empty()) return facts;
  const RankState& rank0 = event.ranks.front();
  // Before Construct no rank has built its Reducer (no buckets listed): it will hold one.
  if (!rank0.buckets.empty()) facts.buckets = static_cast<int>(rank0.buckets.size());
  facts.buckets_rebuilt = rank0.buckets_rebuilt;
  return facts;
}

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
  return {
      {"ddp", f.ddp, "the run is DistributedDataParallel (else nn.DataParallel)"},
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
}

}  // namespace dpv::course
