#include "gui/runtime/engine_worker.h"

#include <exception>
#include <utility>

#include "course/lesson_facts.h"
#include "course/sample_program.h"
#include "engine/data_parallel.h"
#include "engine/ddp/ddp.h"
#include "engine/datasets.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/run/run_spec.h"
#include "engine/zero/flat_layout.h"
#include "gui/runtime/run_spec_from_settings.h"

namespace gui {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

EngineFailure describeException(std::exception_ptr error) {
  EngineFailure failure;
  try {
    std::rethrow_exception(error);
  } catch (const dpv::Error& e) {
    failure.message = qs(e.full());
    failure.reason = e.reason();
    failure.site = e.site();
  } catch (const std::exception& e) {
    failure.message = QStringLiteral("RuntimeError: %1").arg(qs(e.what()));
  } catch (...) {
    failure.message = QStringLiteral("RuntimeError: unknown engine failure");
  }
  return failure;
}

// The sharded strategies' split of the model's parameters, as the engine's ranks compute it.
void describeSharding(IterationInfo& info, const dpv::Model& model, dpv::StrategyKind kind, int world) {
  const int stage = dpv::zero_stage(kind);
  if (stage == 0) return;
  std::vector<dpv::ParamExtent> params;
  for (const auto& d : model.parameter_decls()) {
    params.push_back({d.name, d.shape, dpv::shape_numel(d.shape)});
    info.parameterNames.push_back(d.name);
  }
  if (stage == 1) info.zeroPartition = dpv::zero1_partition(params, world);
  else info.flatLayout = dpv::make_flat_layout(params, world);
}

}  // namespace

dpv::Dataset makeBatchFor(const QString& preset, int64_t rows, uint64_t seed) {
  // The data the code panel's program builds (torch.randn inputs, torch.randint labels), the same
  // batch every iteration, so the loss falls as one would see running the program in a loop.
  return dpv::course::program_data(preset.toStdString(), rows, seed);
}

EngineWorker::EngineWorker(const Generation* generation, const std::atomic<bool>* stopping)
    : latest_(generation), stopping_(stopping) {}

EngineWorker::~EngineWorker() {
  // The iteration refers to the trainer; release in that order.
  iteration_.reset();
  strategy_.reset();
  devices_.reset();
}

bool EngineWorker::stale(quint64 generation) const {
  return stopping_->load() || !latest_->isCurrent(generation);
}

void EngineWorker::configure(const AppSettings& settings, quint64 generation) {
  if (generation >= generation_) {
    settings_ = settings;
    generation_ = generation;
    iteration_.reset();
    strategy_.reset();
    batch_.reset();
    iterationNumber_ = 0;
  }
  emit requestDone(generation);
}

void EngineWorker::reportFailure(quint64 generation, std::exception_ptr error) {
  // The failed iteration cannot continue (replicas are half-way); the next request starts afresh.
  iteration_.reset();
  // A failed rank leaves the group aborted.
  if (strategy_ && dpv::runs_ranks(strategy_->kind())) strategy_.reset();
  EngineFailure failure = describeException(error);
  failure.inProgram = std::exchange(inStage_, false);
  emit failed(generation, failure);
}

bool EngineWorker::iterationRunning() const { return iteration_ && !iteration_->finished(); }

dpv::Strategy& EngineWorker::ensureStrategy() {
  if (!strategy_) {
    strategy_ = dpv::make_strategy(runSpecFromSettings(settings_), devices_);
    iterationNumber_ = 0;
  }
  return *strategy_;
}

void EngineWorker::ensureIteration(quint64 generation) {
  if (iterationRunning()) return;
  iteration_.reset();
  const std::string spec = settings_.devices.toStdString();
  if (!devices_ || deviceSpecInUse_ != settings_.devices) {
    strategy_.reset();
    devices_.reset();  // joins the old device threads before making new ones
    devices_ = dpv::DeviceSet::create(spec);
    deviceSpecInUse_ = settings_.devices;
  }
  dpv::Strategy& strategy = ensureStrategy();
  batch_ = std::make_unique<dpv::Dataset>(makeBatchFor(settings_.preset, settings_.batchSize, settings_.seed));
  iteration_ = strategy.begin_iteration(batch_->inputs, batch_->targets);
  iteration_->set_snapshots(true);  // the pages draw every stage's snapshot
  ++iterationNumber_;
  emit iterationStarted(describeIteration(generation, strategy));
}

IterationInfo EngineWorker::describeIteration(quint64 generation, const dpv::Strategy& strategy) const {
  IterationInfo info;
  info.generation = generation;
  info.iteration = iterationNumber_;
  info.plan = iteration_->plan();
  for (int i = 0; i < devices_->size(); ++i) info.deviceLabels << qs((*devices_)[i].label());
  for (int i = 0; i < devices_->size(); ++i)
    info.deviceTitles.push_back({qs((*devices_)[i].display_name()), qs((*devices_)[i].detail()), (*devices_)[i].kind() == dpv::DeviceKind::Cpu});
  info.deviceSpec = settings_.devices;
  info.transport = qs(strategy.transport());
  info.inputShape = formatShape(batch_->inputs.shape());
  info.inputDtype = QString::fromLatin1(dpv::dtype_name(batch_->inputs.dtype()));
  info.targetShape = formatShape(batch_->targets.shape());
  const dpv::Model& model = strategy.model();
  for (int i = 0; i < model.num_layers(); ++i) {
    info.layerNames << qs(model.layer(i).type());
    info.layerKinds.push_back(model.layer(i).kind());
  }
  info.strategy = strategy.kind();
  info.preset = settings_.preset.toStdString();
  info.modelText = qs(model.describe());
  info.inputHead = batch_->inputs.to_doubles(6);
  if (const auto* dp = dynamic_cast<const dpv::Iteration*>(iteration_.get())) {
    info.chunks = dp->chunks();
    info.devicesBefore = dp->devices_now();
  } else if (const auto* ddp = dynamic_cast<const dpv::DdpIteration*>(iteration_.get())) {
    info.ddp = true;
    describeSharding(info, model, strategy.kind(), devices_->size());
    info.batchRows = batch_->inputs.dim(0);
    info.chunks = dpv::chunk_sizes(batch_->inputs.dim(0), devices_->size());  // DataParallel's, for contrast
    info.shards = ddp->shards();
    info.padding = ddp->padding();
    const dpv::DdpOptions& options = dynamic_cast<const dpv::DdpTrainer&>(strategy).options();
    info.bucketCapMb = options.bucket_cap_mb;
    info.firstBucketBytes = static_cast<qint64>(options.first_bucket_bytes);
    info.parameterBytes = dpv::parameter_bytes(model);
  }
  info.lessonFacts = dpv::course::lesson_facts(runSpecFromSettings(settings_), strategy, *iteration_, batch_->inputs,
                                               iterationNumber_);
  return info;
}

void EngineWorker::stepOnce(quint64 generation) {
  ensureIteration(generation);
  inStage_ = true;
  const dpv::StageEvent event = iteration_->step();
  inStage_ = false;
  emit stageFinished(generation, event);
}

void EngineWorker::prepare(quint64 generation) {
  if (!stale(generation)) {
    try {
      ensureIteration(generation);
    } catch (...) {
      reportFailure(generation, std::current_exception());
    }
  }
  emit requestDone(generation);
}

void EngineWorker::runStage(quint64 generation) {
  if (!stale(generation)) {
    try {
      stepOnce(generation);
    } catch (...) {
      reportFailure(generation, std::current_exception());
    }
  }
  emit requestDone(generation);
}

void EngineWorker::runIteration(quint64 generation) {
  try {
    if (!stale(generation)) {
      ensureIteration(generation);
      // Checked between stages so closing the window or new settings interrupt a long run.
      while (!stale(generation) && iterationRunning()) stepOnce(generation);
    }
  } catch (...) {
    reportFailure(generation, std::current_exception());
  }
  emit requestDone(generation);
}

void EngineWorker::runSample(const AppSettings& settings, quint64 requestId) {
  QString text;
  bool ok = true;
  try {
    auto devices = dpv::DeviceSet::create(settings.devices.toStdString());
    const dpv::course::SampleRun run = dpv::course::run_sample_program(devices, settings.seed);

    const int n = devices->size();
    if (n > 1) {
      const bool simulated = (*devices)[0].kind() == dpv::DeviceKind::Cpu;
      text += simulated ? QStringLiteral("Using %1 GPUs (simulated on CPU)\n").arg(n)
                        : QStringLiteral("Using %1 GPUs\n").arg(n);
    } else {
      text += QStringLiteral("Using single GPU or CPU\n");
    }
    QStringList chunks;
    for (int64_t c : run.chunks) chunks << QString::number(c);
    text += QStringLiteral("Loss: %1\n").arg(run.loss, 0, 'f', 4);
    text += QStringLiteral("\n# what DataParallel did behind model(inputs):\n");
    text += QStringLiteral("# the batch of %1 was split into chunks of [%2] rows, one per replica\n")
                .arg(dpv::course::kSampleBatch)
                .arg(chunks.join(QStringLiteral(", ")));
    text += QStringLiteral("# devices: %1\n").arg(settings.devices);
  } catch (...) {
    ok = false;
    text = describeException(std::current_exception()).message;
  }
  emit sampleFinished(requestId, text, ok);
}

}  // namespace gui
