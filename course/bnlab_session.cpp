#include "course/bnlab_session.h"

#include <algorithm>
#include <numeric>
#include <cmath>
#include <exception>

#include "course/batchnorm_stats.h"
#include "course/tensor_difference.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/model_spec.h"

namespace dpv::course {

namespace {

constexpr std::array<BnLabModel, kBnLabModelCount> kModels = {BnLabPerDevice, BnLabSync, BnLabReference,
                                                              BnLabDdpPerRank, BnLabDdpSync};

int class_count(const dpv::ModelSpec& spec) {
  for (auto it = spec.layers.rbegin(); it != spec.layers.rend(); ++it)
    if (it->kind == dpv::LayerKind::Linear) return static_cast<int>(it->out_features);
  return 2;
}

// The engine's text of what a model threw.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const dpv::Error& e) {
    return e.full();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

}  // namespace

const char* bnlab_model_name(BnLabModel which) {
  switch (which) {
    case BnLabPerDevice: return "per-device BatchNorm";
    case BnLabSync: return "SyncBatchNorm";
    case BnLabReference: return "single-device reference";
    case BnLabDdpPerRank: return "per-rank BatchNorm (DDP)";
    case BnLabDdpSync: return "SyncBatchNorm (DDP)";
  }
  return "?";
}

dpv::ModelSpec bnlab_model_spec(double bnMomentum) {
  dpv::ModelSpec spec = dpv::preset_model("mlp-bn");
  for (auto& layer : spec.layers)
    if (dpv::is_batchnorm(layer.kind)) layer.momentum = bnMomentum;
  return spec;
}

dpv::RunSpec bnlab_run_spec(const BnLabConfig& config, BnLabModel which) {
  dpv::RunSpec spec;
  // The reference always runs on one device with the whole batch.
  spec.devices = which == BnLabReference ? std::string("cpu:1") : config.devices;
  spec.model = bnlab_model_spec(config.bnMomentum);
  spec.batch = config.batchSize;
  spec.optimizer.lr = config.learningRate;
  spec.optimizer.momentum = config.sgdMomentum;
  spec.sync_bn = which == BnLabSync || which == BnLabDdpSync;
  spec.seed = config.seed;
  spec.strategy = bnlab_is_ddp(which) ? dpv::StrategyKind::DistributedDataParallel : dpv::StrategyKind::DataParallel;
  return spec;
}

dpv::Dataset bnlab_dataset(const BnLabConfig& config) {
  dpv::check(config.datasetSize >= 2, "the BatchNorm lab needs a data set of at least 2 points", dpv::ErrorClass::ValueError);
  const dpv::ModelSpec spec = bnlab_model_spec(config.bnMomentum);
  // A seed of its own for the data, so the data set does not repeat the weights' random stream.
  return dpv::make_spiral(config.datasetSize, class_count(spec), config.seed ^ 0xDA7A5E7ull, spec.dtype);
}

dpv::Dataset bnlab_batch(const dpv::Dataset& data, const BnLabConfig& config, int64_t step) {
  const int64_t rows = data.inputs.dim(0);
  dpv::check(config.batchSize >= 1, "batch size must be at least 1, got " + std::to_string(config.batchSize),
             dpv::ErrorClass::ValueError);
  dpv::check(config.batchSize <= rows,
             "batch size " + std::to_string(config.batchSize) + " is larger than the lab's data set (" +
                 std::to_string(rows) + " points)",
             dpv::ErrorClass::ValueError);
  const int64_t features = data.inputs.numel() / rows;
  const std::vector<double> inputs = data.inputs.to_doubles();   // [rows, features]
  const std::vector<int64_t> targets = data.targets.to_int64();  // [rows]

  // A partial Fisher-Yates shuffle drawn from (seed, step): distinct rows, reproducible per step.
  dpv::Rng rng(config.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(step) * 0xBF58476D1CE4E5B9ull + 1);
  std::vector<int64_t> order(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) order[static_cast<size_t>(i)] = i;
  std::vector<double> batchInputs;    // [batch, features]
  std::vector<int64_t> batchTargets;  // [batch]
  batchInputs.reserve(static_cast<size_t>(config.batchSize * features));
  batchTargets.reserve(static_cast<size_t>(config.batchSize));
  for (int64_t i = 0; i < config.batchSize; ++i) {
    const int64_t j = i + rng.randint(rows - i);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
    const int64_t row = order[static_cast<size_t>(i)];
    batchInputs.insert(batchInputs.end(), inputs.begin() + row * features, inputs.begin() + (row + 1) * features);
    batchTargets.push_back(targets[static_cast<size_t>(row)]);
  }
  dpv::Shape shape = data.inputs.shape();
  shape[0] = config.batchSize;
  dpv::Dataset batch;
  batch.inputs = dpv::Tensor::from_doubles(shape, data.inputs.dtype(), batchInputs);
  batch.targets = dpv::Tensor::from_int64({config.batchSize}, batchTargets);
  batch.classes = data.classes;
  batch.name = data.name;
  return config.classSorted ? dpv::sort_by_class(batch) : batch;
}

double bnlab_max_abs_difference(const dpv::TensorMap& a, const dpv::TensorMap& b,
                                const std::vector<std::string>& names) {
  return max_abs_difference(a, b, names).value_or(BnLabModelStep::kNaN);
}

BnLabSession::BnLabSession(const BnLabConfig& config)
    : config_(config), model_(bnlab_model_spec(config.bnMomentum)), data_(bnlab_dataset(config)) {
  for (int i = 0; i < model_.num_layers(); ++i)
    if (model_.layer(i).is_batchnorm()) bnLayers_.push_back(i);
  for (const auto& decl : model_.parameter_decls()) params_.push_back(decl.name);

  initial_ = model_.initial_state(config.seed);
  // Each model gets its own device set so no two models share worker threads or memory counters.
  for (BnLabModel which : kModels) {
    const dpv::RunSpec spec = bnlab_run_spec(config_, which);
    models_[static_cast<size_t>(which)] = dpv::make_strategy(spec, dpv::DeviceSet::create(spec.devices), &initial_);
  }
  for (int layer : bnLayers_) {
    const std::string prefix = model_.layer_prefix(layer);
    emaMean_.push_back(initial_.at(prefix + "running_mean").to_doubles());
    emaVar_.push_back(initial_.at(prefix + "running_var").to_doubles());
  }
}

BnLabSession::~BnLabSession() = default;

int BnLabSession::deviceCount() const { return models_[BnLabPerDevice]->devices().size(); }

std::vector<std::string> BnLabSession::deviceLabels() const {
  std::vector<std::string> labels;
  const dpv::DeviceSet& set = models_[BnLabPerDevice]->devices();
  for (int i = 0; i < set.size(); ++i) labels.push_back(set[i].label());
  return labels;
}

void BnLabSession::updateDevice0Ema(BnLabLayerStats& stats, size_t slot) {
  if (stats.chunks.empty()) return;
  // Device 0's chunk alone, through PyTorch's update: what per-device BatchNorm's saved buffers follow.
  dpv::course::update_running_stats(emaMean_[slot], emaVar_[slot], stats.chunks.front(), config_.bnMomentum);
  stats.device0EmaMean = emaMean_[slot];
  stats.device0EmaVar = emaVar_[slot];
}

std::pair<std::string, std::string> BnLabSession::probeFirstStep() {
  const dpv::Dataset batch = bnlab_batch(data_, config_, 0);
  for (BnLabModel which : kModels) {
    const std::string error = error_of([&] {
      // A copy on devices of its own: a rank that fails there leaves the real model's devices alone.
      const dpv::RunSpec spec = bnlab_run_spec(config_, which);
      auto copy = dpv::make_strategy(spec, dpv::DeviceSet::create(spec.devices), &initial_);
      copy->begin_iteration(batch.inputs, batch.targets)->run_to_end();
    });
    if (!error.empty()) return {bnlab_model_name(which), error};
  }
  return {};
}

BnLabLayerStats BnLabSession::layerStats(int layer, const std::vector<dpv::BatchNormStats>& all) const {
  BnLabLayerStats stats;
  stats.layer = layer;
  const dpv::BatchNormStats* global = nullptr;
  for (const auto& s : all) {
    if (s.layer != layer) continue;
    if (s.device < 0) global = &s;
    else stats.chunks.push_back(s);
  }
  std::sort(stats.chunks.begin(), stats.chunks.end(),
            [](const dpv::BatchNormStats& a, const dpv::BatchNormStats& b) { return a.device < b.device; });
  if (global) stats.whole = *global;
  else if (stats.chunks.size() == 1) stats.whole = stats.chunks.front();
  else stats.whole = dpv::course::merge_batchnorm_stats(stats.chunks);
  return stats;
}

BnLabModelStep BnLabSession::runModel(BnLabModel which, const dpv::Dataset& batch, std::vector<int64_t>& shards) {
  dpv::Strategy& strategy = *models_[static_cast<size_t>(which)];
  // The lab's global batch: DataParallel scatters it, DDP gives each rank its DistributedSampler
  // shard (no shuffling: the batch is already drawn at random).
  const auto iteration = strategy.begin_iteration(batch.inputs, batch.targets);
  iteration->run_to_end();

  BnLabModelStep result;
  // What an all-reduced loss would print, where each DDP rank's own is local.
  result.loss = iteration->mean_rank_loss();
  const std::vector<RankOutput> outputs = iteration->rank_outputs();
  result.accuracy = accuracy_over_ranks(outputs, batch.targets);
  if (strategy.kind() == dpv::StrategyKind::DistributedDataParallel) {
    shards.clear();
    for (const RankOutput& out : outputs) shards.push_back(static_cast<int64_t>(out.rows.size()));
  }
  // The running statistics that are saved: device 0's (DataParallel), rank 0's (DDP).
  const dpv::TensorMap& buffers = *strategy.tensors().buffers;
  for (size_t slot = 0; slot < bnLayers_.size(); ++slot) {
    const int layer = bnLayers_[slot];
    BnLabLayerStats stats = layerStats(layer, iteration->batchnorm_stats());
    const std::string prefix = model_.layer_prefix(layer);
    stats.runningMean = buffers.at(prefix + "running_mean").to_doubles();
    stats.runningVar = buffers.at(prefix + "running_var").to_doubles();
    if (which == BnLabPerDevice) updateDevice0Ema(stats, slot);
    result.layers.push_back(std::move(stats));
  }
  return result;
}

void BnLabSession::stopModel(BnLabModel which, const std::string& error) {
  modelErrors_[static_cast<size_t>(which)] = error;
  modelStoppedAt_[static_cast<size_t>(which)] = steps_ + 1;
  if (failedModel_.empty()) {  // the first error, reported once every model has stopped
    failedModel_ = bnlab_model_name(which);
    firstError_ = error;
  }
}

void BnLabSession::measureDistances(BnLabStep& out) {
  if (modelStopped(BnLabReference)) return;
  const dpv::StrategyTensors reference = models_[BnLabReference]->tensors();
  for (BnLabModel which : kModels) {
    auto& m = out.models[static_cast<size_t>(which)];
    if (which == BnLabReference || m.stopped) continue;
    // DDP: rank 0's parameters and averaged gradients (every rank holds the same ones).
    const dpv::StrategyTensors mine = models_[static_cast<size_t>(which)]->tensors();
    m.paramDistance = bnlab_max_abs_difference(*mine.params, *reference.params, params_);
    m.gradDistance = bnlab_max_abs_difference(*mine.grads, *reference.grads, params_);
  }
}

void BnLabSession::setBatchSize(int64_t rows) {
  dpv::check(rows >= 1, "the batch needs at least one row, got " + std::to_string(rows), dpv::ErrorClass::ValueError);
  config_.batchSize = rows;
}

void BnLabSession::setLearningRate(double lr) {
  for (auto& model : models_)
    if (model) model->set_learning_rate(lr);  // each checks lr, so a bad one changes none
  config_.learningRate = lr;
}

BnLabStep BnLabSession::step() {
  if (failed())
    throw dpv::Error("the lab stopped after an error in every model (first: " + failedModel_ + "); reset it to train again");
  BnLabStep out;
  const dpv::Dataset batch = bnlab_batch(data_, config_, steps_);
  out.chunks = dpv::chunk_sizes(config_.batchSize, deviceCount());
  // A model the engine refuses stops alone: the others still train on the same batches, so the
  // learner sees SyncBatchNorm go on where per-device BatchNorm cannot.
  for (BnLabModel which : kModels) {
    auto& result = out.models[static_cast<size_t>(which)];
    if (modelStopped(which)) {
      result.stopped = true;
      continue;
    }
    const std::string error = error_of([&] { result = runModel(which, batch, out.shards); });
    if (error.empty()) continue;
    result = BnLabModelStep{};
    result.stopped = true;
    stopModel(which, error);
  }
  const bool anyTraining = std::any_of(modelErrors_.begin(), modelErrors_.end(), [](const std::string& e) { return e.empty(); });
  if (!anyTraining) {
    failure_ = firstError_;
    throw dpv::Error("every model of the lab stopped; the first: " + failure_);
  }
  // Keep only the devices that held rows (chunk_sizes(0, k) gives k zeros).
  out.chunks.erase(std::remove(out.chunks.begin(), out.chunks.end(), int64_t{0}), out.chunks.end());
  measureDistances(out);
  out.batchRows = batch.inputs.dim(0);
  if (!out.shards.empty())
    out.ddpPadding = std::accumulate(out.shards.begin(), out.shards.end(), int64_t{0}) - out.batchRows;
  out.step = ++steps_;
  return out;
}

}  // namespace dpv::course
