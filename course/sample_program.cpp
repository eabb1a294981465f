#include "course/sample_program.h"

#include <algorithm>
#include <cstdio>

#include "engine/data_parallel.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/model_data.h"

namespace dpv::course {

ModelSpec sample_model() { return preset_model(kSamplePreset); }

namespace {

// torch.randn(shape) then torch.randint(0, classes, (rows,)) from one generator seeded with seed + 1.
Dataset randn_randint(Shape shape, int classes, uint64_t seed, DType dtype) {
  const int64_t rows = shape.front();
  check(rows > 0, "the batch size must be at least 1", ErrorClass::ValueError);
  Rng rng(seed + 1);
  std::vector<double> inputs(static_cast<size_t>(shape_numel(shape)));
  for (double& v : inputs) v = rng.normal();
  std::vector<int64_t> labels(static_cast<size_t>(rows));
  for (int64_t& v : labels) v = rng.randint(classes);
  Dataset d;
  d.inputs = Tensor::from_doubles(shape, dtype, inputs);
  d.targets = Tensor::from_int64({rows}, labels);
  d.classes = classes;
  d.name = "the program's torch.randn inputs and torch.randint labels";
  return d;
}

}  // namespace

Dataset sample_data(int64_t rows, uint64_t seed, DType dtype) {
  return randn_randint({rows, kSampleFeatures}, kSampleClasses, seed, dtype);  // torch.randn(rows, 10)
}

Dataset program_data(const std::string& preset, int64_t rows, uint64_t seed) {
  const ModelSpec spec = preset_model(preset);
  const ModelInputShape s = input_shape_of(spec);
  const Shape shape = s.image ? Shape{rows, s.channels, s.height, s.width} : Shape{rows, s.features};
  return randn_randint(shape, s.classes, seed, spec.dtype);
}

int64_t batch_that_works(const std::string& preset, int64_t batch, int devices) {
  const ModelSpec spec = preset_model(preset);
  const bool batchnorm = std::any_of(spec.layers.begin(), spec.layers.end(), [](const LayerSpec& l) { return is_batchnorm(l.kind); });
  if (!batchnorm || devices < 1) return batch;
  const auto leaves_one = [devices](int64_t n) {
    const std::vector<int64_t> chunks = chunk_sizes(n, devices);
    return std::any_of(chunks.begin(), chunks.end(), [](int64_t c) { return c == 1; });
  };
  if (!leaves_one(batch)) return batch;
  int64_t n = std::max<int64_t>(batch, 4 * static_cast<int64_t>(devices));
  while (leaves_one(n)) ++n;
  return n;
}

SampleRun run_sample_program(const std::shared_ptr<DeviceSet>& devices, uint64_t seed) {
  Model model(sample_model());
  const TensorMap state = model.initial_state(seed);
  const Dataset data = sample_data(kSampleBatch, seed, model.dtype());
  TrainOptions options;
  options.optimizer.lr = kSampleLr;
  Trainer trainer(devices, std::move(model), state, options);
  Iteration iteration(trainer, data.inputs, data.targets);
  iteration.run_to_end();

  SampleRun run;
  run.devices = devices->size();
  run.chunks = iteration.chunks();
  run.output_shape = iteration.output().shape();
  run.model_text = trainer.model().layer(0).describe();
  run.loss = iteration.loss();
  return run;
}

namespace {

using K = StageKind;

std::string join(const std::vector<int64_t>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out;
}

// PyTorch's constructor call for a layer.
std::string layer_code(const LayerSpec& l) {
  const auto n = [](int64_t v) { return std::to_string(v); };
  switch (l.kind) {
    case LayerKind::Linear:
      return "nn.Linear(" + n(l.in_features) + ", " + n(l.out_features) + (l.bias ? "" : ", bias=False") + ")";
    case LayerKind::ReLU: return "nn.ReLU()";
    case LayerKind::Flatten: return "nn.Flatten()";
    case LayerKind::Conv2d:
      return "nn.Conv2d(" + n(l.in_channels) + ", " + n(l.out_channels) + ", kernel_size=" + n(l.kernel_size) +
             ", stride=" + n(l.stride) + ", padding=" + n(l.padding) + ")";
    case LayerKind::BatchNorm1d: return "nn.BatchNorm1d(" + n(l.num_features) + ")";
    case LayerKind::BatchNorm2d: return "nn.BatchNorm2d(" + n(l.num_features) + ")";
  }
  return layer_kind_name(l.kind);
}

// Python's repr of a float as the program writes it (0.01, 0.1, 1e-05).
std::string py_float(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

}  // namespace

std::vector<ProgramLine> model_definition(const std::string& preset, ModelPlacement placement) {
  const ModelSpec spec = preset_model(preset);
  const std::string cuda = placement == ModelPlacement::Cuda ? ".cuda()" : "";
  std::vector<ProgramLine> out;
  auto add = [&](std::string text, int layer = -1) { out.push_back(ProgramLine{std::move(text), {}, layer}); };
  if (preset == kSamplePreset) {
    add("class SimpleModel(nn.Module):");
    add("    def __init__(self):");
    add("        super().__init__()");
    add("        self.linear = " + layer_code(spec.layers.front()), 0);
    add("    def forward(self, x):");
    add("        return self.linear(x)");
    add("");
    add("model = SimpleModel()" + cuda);
  } else {
    add("model = nn.Sequential(");
    for (size_t i = 0; i < spec.layers.size(); ++i) add("    " + layer_code(spec.layers[i]) + ",", static_cast<int>(i));
    add(")" + cuda);
  }
  return out;
}

std::string program_parameter_name(const std::string& preset, const std::string& engine_name) {
  // SimpleModel wraps layer 0 as self.linear: "0.weight" is its "linear.weight".
  static const std::string kFirstLayer = "0.";
  if (preset != kSamplePreset || engine_name.rfind(kFirstLayer, 0) != 0) return engine_name;
  return "linear." + engine_name.substr(kFirstLayer.size());
}

std::vector<ProgramLine> sample_program(const ProgramOptions& o) {
  const ModelSpec spec = preset_model(o.preset);
  const ModelInputShape shape = input_shape_of(spec);
  std::vector<ProgramLine> out;
  auto add = [&](std::string text, std::vector<K> stages = {}, int layer = -1) {
    out.push_back(ProgramLine{std::move(text), std::move(stages), layer});
  };
  add("import torch");
  add("import torch.nn as nn");
  add("import torch.optim as optim");
  add("");
  for (ProgramLine& line : model_definition(o.preset, ModelPlacement::Cuda)) out.push_back(std::move(line));
  add("# devices: " + o.devices);
  if (o.sync_bn) {
    // nn.DataParallel has no synchronised BatchNorm (an nn.SyncBatchNorm inside it does not sync
    // across the replicas); the statistics the app merges are those of this DDP program.
    std::string processes = "N";  // a spec the engine will refuse still gets its program text
    try {
      processes = std::to_string(parse_device_spec(o.devices).count);
    } catch (const Error&) {
    }
    add("# BatchNorm over the whole batch is what DDP + SyncBatchNorm");
    add("# computes; nn.DataParallel cannot sync BatchNorm. In PyTorch,");
    add("# one process per GPU (torchrun --nproc_per_node=" + processes + "):");
    add("#   dist.init_process_group(\"nccl\"); rank = dist.get_rank()");
    add("#   model = nn.SyncBatchNorm.convert_sync_batchnorm(model)");
    add("#   model = nn.parallel.DistributedDataParallel(model, device_ids=[rank])");
    add("# The app runs DataParallel's stages below and merges BatchNorm's");
    add("# statistics over all devices, as that program does:");
  }
  add("model = nn.DataParallel(model)");
  add("criterion = nn.CrossEntropyLoss()");
  add("optimizer = optim.SGD(model.parameters(), lr=" + py_float(o.lr) + ")");
  add("");
  const std::vector<int64_t> input = shape.image ? std::vector<int64_t>{o.batch, shape.channels, shape.height, shape.width}
                                                 : std::vector<int64_t>{o.batch, shape.features};
  add("inputs = torch.randn(" + join(input) + ").cuda()");
  add("labels = torch.randint(0, " + std::to_string(shape.classes) + ", (" + std::to_string(o.batch) + ",)).cuda()");
  add("");
  add("# scatter, replicate, forward, gather:");
  add("outputs = model(inputs)", {K::Scatter, K::Replicate, K::Forward, K::Gather});
  add("# on device 0:");
  add("loss = criterion(outputs, labels)", {K::Loss});
  add("optimizer.zero_grad()");
  add("# grads flow back, summed on device 0:");
  add("loss.backward()", {K::GradScatter, K::Backward, K::ReduceGrads});
  add("# SGD on device 0 only:");
  add("optimizer.step()", {K::Step});
  add("");
  add("print(f\"Loss: {loss.item():.4f}\")");
  return out;
}

std::vector<ProgramLine> ddp_program(const DdpProgramOptions& o) {
  std::vector<ProgramLine> out;
  auto add = [&](std::string text, std::vector<K> stages = {}) { out.push_back(ProgramLine{std::move(text), std::move(stages), -1}); };
  const int64_t ranks = std::max(1, o.ranks);
  const int64_t per_rank = (o.rows + ranks - 1) / ranks;
  const std::string bucket_bytes = std::to_string(o.bucket_bytes);
  add("# torchrun --nproc_per_node=" + std::to_string(ranks) + " train.py  (one process per device)");
  add("import torch");
  add("import torch.nn as nn");
  add("import torch.distributed as dist");
  add("from torch.nn.parallel import DistributedDataParallel as DDP");
  add("from torch.utils.data import DataLoader, DistributedSampler");
  add("");
  add("dist.init_process_group(\"gloo\")  # \"nccl\" on GPUs; RANK, WORLD_SIZE from torchrun");
  add("rank = dist.get_rank()");
  // The DataParallel program's model (one definition for both modes), left on this rank's device.
  for (ProgramLine& line : model_definition(o.preset, ModelPlacement::AsBuilt)) out.push_back(std::move(line));
  add("dist._DEFAULT_FIRST_BUCKET_BYTES = " + bucket_bytes + "  # the last layer's bytes: small buckets");
  add("model = DDP(model, bucket_cap_mb=" + bucket_bytes + " / 2**20)  # rank 0's state to all", {K::Construct});
  add("criterion = nn.CrossEntropyLoss()");
  add("optimizer = torch.optim.SGD(model.parameters(), lr=" + py_float(o.lr) + ")");
  add("");
  add("# dataset: the same " + std::to_string(o.rows) + " samples on every rank");
  add("sampler = DistributedSampler(dataset, shuffle=False)", {K::Sample});
  add("loader = DataLoader(dataset, batch_size=" + std::to_string(per_rank) + ", sampler=sampler)  # per process");
  add("for inputs, labels in loader:  # this rank's strided shard", {K::Sample});
  add("    outputs = model(inputs)  # rank 0's buffers first, then forward", {K::BroadcastBuffers, K::Forward});
  add("    loss = criterion(outputs, labels)  # this rank's own loss", {K::Loss});
  add("    optimizer.zero_grad()");
  add("    loss.backward()  # buckets all-reduce while it runs", {K::Backward, K::Finalize});
  add("    optimizer.step()  # same averaged grads on every rank", {K::Step});
  add("    if rank == 0:");
  add("        print(f\"loss {loss.item():.4f}\")  # rank 0's loss only");
  return out;
}

std::vector<ProgramLine> ddp_source_program() {
  std::vector<ProgramLine> out;
  auto add = [&](std::string text, std::vector<K> stages = {}) { out.push_back(ProgramLine{std::move(text), std::move(stages), -1}); };
  add("# torch/nn/parallel/distributed.py (PyTorch 1.13, abridged)");
  add("# DistributedDataParallel.__init__, lines 646-663");
  add("self.bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)");
  add("_verify_param_shape_across_processes(self.process_group, parameters)", {K::Construct});
  add("_sync_module_states(module=self.module, ..., src=0)  # broadcast", {K::Construct});
  add("# _ddp_init_helper, lines 720-751: iteration 1 has ONE bucket");
  add("bucket_size_limits = [sys.maxsize]", {K::Construct});
  add("self.reducer = dist.Reducer(parameters, ..., dist._DEFAULT_FIRST_BUCKET_BYTES)", {K::Construct});
  add("");
  add("# torch/utils/data/distributed.py, DistributedSampler.__iter__, lines 97-121");
  add("indices = list(range(len(self.dataset)))", {K::Sample});
  add("indices += indices[:padding_size]  # pad by repeating the start", {K::Sample});
  add("indices = indices[self.rank:self.total_size:self.num_replicas]", {K::Sample});
  add("");
  add("# DistributedDataParallel.forward, lines 1005-1058");
  add("self.reducer.prepare_for_forward()");
  add("if self.reducer._rebuild_buckets(): ...  # once, before the 2nd forward");
  add("if self._check_sync_bufs_pre_fwd():", {K::BroadcastBuffers});
  add("    self._sync_buffers()  # rank 0's buffers to every rank", {K::BroadcastBuffers});
  add("output = self._run_ddp_forward(*inputs, **kwargs)", {K::Forward});
  add("self.reducer.prepare_for_backward([])");
  add("# the loss is the user's code: never averaged across ranks", {K::Loss});
  add("");
  add("# torch/csrc/distributed/c10d/reducer.cpp, during loss.backward()");
  add("# autograd_hook -> mark_variable_ready: grad * (1/W) into its bucket", {K::Backward});
  add("# mark_bucket_ready: all_reduce full buckets, strictly in order", {K::Backward});
  add("# finalize_backward: wait for the all-reduces, copy into .grad", {K::Finalize});
  add("");
  add("# torch/optim/sgd.py, SGD.step (line 120): every rank, same grads", {K::Step});
  add("param.add_(grad, alpha=-lr)", {K::Step});
  return out;
}

}  // namespace dpv::course
