#include "gui/runtime/engine_worker.h"

#include <exception>

#include "engine/data_parallel.h"
#include "engine/datasets.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/model_spec.h"

namespace gui {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

int64_t classesOf(const dpv::ModelSpec& spec) {
  for (auto it = spec.layers.rbegin(); it != spec.layers.rend(); ++it) {
    if (it->type == "linear") return it->out_features;
  }
  return 2;
}

QString describeException(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const dpv::Error& e) {
    return qs(e.full());
  } catch (const std::exception& e) {
    return QStringLiteral("RuntimeError: %1").arg(qs(e.what()));
  } catch (...) {
    return QStringLiteral("RuntimeError: unknown engine failure");
  }
}

}  // namespace

dpv::Dataset makeBatchFor(const dpv::ModelSpec& spec, int64_t rows, uint64_t seed, int index) {
  dpv::check(!spec.layers.empty(), "the model has no layers, so it cannot take a batch", "ValueError");
  dpv::check(rows > 0, "the batch size must be at least 1", "ValueError");
  const auto& first = spec.layers.front();
  const int classes = static_cast<int>(std::max<int64_t>(2, classesOf(spec)));
  const uint64_t batchSeed = seed * 1000003ULL + static_cast<uint64_t>(index);
  if (first.type == "conv2d") return dpv::make_images(rows, classes, first.in_channels, 32, 32, batchSeed, spec.dtype);
  if (first.type == "linear" && first.in_features == 2) return dpv::make_spiral(rows, classes, batchSeed, spec.dtype);
  if (first.type == "linear") return dpv::make_blobs(rows, classes, first.in_features, batchSeed, spec.dtype);
  throw dpv::Error("the app can only feed models that start with Linear or Conv2d (this one starts with " +
                       first.type + ")",
                   "ValueError");
}

EngineWorker::EngineWorker(const std::atomic<quint64>* latestGeneration, const std::atomic<bool>* stopping)
    : latest_(latestGeneration), stopping_(stopping) {}

EngineWorker::~EngineWorker() {
  // The iteration refers to the trainer; release in that order.
  iteration_.reset();
  trainer_.reset();
  devices_.reset();
}

bool EngineWorker::stale(quint64 generation) const {
  return stopping_->load() || generation < latest_->load();
}

void EngineWorker::configure(const AppSettings& settings, quint64 generation) {
  if (generation >= generation_) {
    settings_ = settings;
    generation_ = generation;
    iteration_.reset();
    trainer_.reset();
    batch_.reset();
    iterationNumber_ = 0;
  }
  emit requestDone(generation);
}

void EngineWorker::reportFailure(quint64 generation, const QString& message) {
  // The failed iteration cannot continue (replicas are half-way); the next request starts afresh.
  iteration_.reset();
  emit failed(generation, message);
}

void EngineWorker::ensureIteration(quint64 generation) {
  if (iteration_ && !iteration_->finished()) return;
  iteration_.reset();
  const std::string spec = settings_.devices.toStdString();
  if (!devices_ || deviceSpecInUse_ != settings_.devices) {
    trainer_.reset();
    devices_.reset();  // joins the old device threads before making new ones
    devices_ = dpv::DeviceSet::create(spec);
    deviceSpecInUse_ = settings_.devices;
  }
  const dpv::ModelSpec modelSpec = dpv::preset_model(settings_.preset.toStdString());
  if (!trainer_) {
    dpv::Model model(modelSpec);
    const dpv::TensorMap state = model.initial_state(settings_.seed);
    dpv::TrainOptions options;
    options.lr = settings_.learningRate;
    options.sync_bn = settings_.syncBatchNorm;
    trainer_ = std::make_unique<dpv::Trainer>(devices_, std::move(model), state, options);
    iterationNumber_ = 0;
  }
  batch_ = std::make_unique<dpv::Dataset>(makeBatchFor(modelSpec, settings_.batchSize, settings_.seed, iterationNumber_));
  iteration_ = std::make_unique<dpv::Iteration>(*trainer_, batch_->inputs, batch_->targets);
  ++iterationNumber_;

  IterationInfo info;
  info.generation = generation;
  info.iteration = iterationNumber_;
  info.plan = iteration_->plan();
  info.chunks = iteration_->chunks();
  for (int i = 0; i < devices_->size(); ++i) info.deviceLabels << qs((*devices_)[i].label());
  info.deviceSpec = settings_.devices;
  info.transport = qs(trainer_->collectives().transport());
  info.inputShape = formatShape(batch_->inputs.shape());
  info.inputDtype = QString::fromLatin1(dpv::dtype_name(batch_->inputs.dtype()));
  info.targetShape = formatShape(batch_->targets.shape());
  const dpv::Model& model = trainer_->model();
  for (int i = 0; i < model.num_layers(); ++i) info.layerNames << qs(model.layer(i).type());
  info.modelText = qs(model.describe());
  info.inputHead = batch_->inputs.to_doubles(6);
  emit iterationStarted(info);
}

void EngineWorker::stepOnce(quint64 generation) {
  ensureIteration(generation);
  const dpv::StageEvent event = iteration_->step();
  emit stageFinished(generation, event);
}

void EngineWorker::prepare(quint64 generation) {
  if (!stale(generation)) {
    try {
      ensureIteration(generation);
    } catch (...) {
      reportFailure(generation, describeException(std::current_exception()));
    }
  }
  emit requestDone(generation);
}

void EngineWorker::runStage(quint64 generation) {
  if (!stale(generation)) {
    try {
      stepOnce(generation);
    } catch (...) {
      reportFailure(generation, describeException(std::current_exception()));
    }
  }
  emit requestDone(generation);
}

void EngineWorker::runIteration(quint64 generation) {
  try {
    if (!stale(generation)) {
      ensureIteration(generation);
      // Checked between stages so closing the window or new settings interrupt a long run.
      while (!stale(generation) && iteration_ && !iteration_->finished()) stepOnce(generation);
    }
  } catch (...) {
    reportFailure(generation, describeException(std::current_exception()));
  }
  emit requestDone(generation);
}

void EngineWorker::runSample(const AppSettings& settings, quint64 requestId) {
  QString text;
  bool ok = true;
  try {
    auto devices = dpv::DeviceSet::create(settings.devices.toStdString());
    // The seed program: model = SimpleModel() (Linear(10, 2)); inputs = torch.randn(32, 10);
    // labels = torch.randint(0, 2, (32,)); CrossEntropyLoss; SGD(lr=0.01); one step.
    dpv::Model model(dpv::preset_model("simple"));
    const dpv::TensorMap state = model.initial_state(settings.seed);
    dpv::Rng rng(settings.seed + 1);
    std::vector<double> inputs(32 * 10);
    for (double& v : inputs) v = rng.normal();
    std::vector<int64_t> labels(32);
    for (int64_t& v : labels) v = rng.randint(2);
    const dpv::Tensor input = dpv::Tensor::from_doubles({32, 10}, model.dtype(), inputs);
    const dpv::Tensor target = dpv::Tensor::from_int64({32}, labels);
    dpv::TrainOptions options;
    options.lr = 0.01;
    dpv::Trainer trainer(devices, std::move(model), state, options);
    dpv::Iteration iteration(trainer, input, target);
    iteration.run_to_end();

    const int n = devices->size();
    if (n > 1) {
      const bool simulated = (*devices)[0].kind() == dpv::DeviceKind::Cpu;
      text += simulated ? QStringLiteral("Using %1 GPUs (simulated on CPU)\n").arg(n)
                        : QStringLiteral("Using %1 GPUs\n").arg(n);
    } else {
      text += QStringLiteral("Using single GPU or CPU\n");
    }
    QStringList chunks;
    for (int64_t c : iteration.chunks()) chunks << QString::number(c);
    text += QStringLiteral("Loss: %1\n").arg(iteration.loss(), 0, 'f', 4);
    text += QStringLiteral("\n# what DataParallel did behind model(inputs):\n");
    text += QStringLiteral("# the batch of 32 was split into chunks of [%1] rows, one per replica\n").arg(chunks.join(QStringLiteral(", ")));
    text += QStringLiteral("# devices: %1\n").arg(settings.devices);
  } catch (...) {
    ok = false;
    text = describeException(std::current_exception());
  }
  emit sampleFinished(requestId, text, ok);
}

}  // namespace gui
