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
  options.lr = kSampleLr;
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
  if (o.preset == kSamplePreset) {
    add("class SimpleModel(nn.Module):");
    add("    def __init__(self):");
    add("        super().__init__()");
    add("        self.linear = " + layer_code(spec.layers.front()), {}, 0);
    add("    def forward(self, x):");
    add("        return self.linear(x)");
    add("");
    add("model = SimpleModel().cuda()");
  } else {
    add("model = nn.Sequential(");
    for (size_t i = 0; i < spec.layers.size(); ++i) add("    " + layer_code(spec.layers[i]) + ",", {}, static_cast<int>(i));
    add(").cuda()");
  }
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

}  // namespace dpv::course
