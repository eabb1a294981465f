#include "gui/bnlab/session.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include "course/batchnorm_stats.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/model_spec.h"

namespace gui {

namespace {

int class_count(const dpv::ModelSpec& spec) {
  for (auto it = spec.layers.rbegin(); it != spec.layers.rend(); ++it)
    if (it->kind == dpv::LayerKind::Linear) return static_cast<int>(it->out_features);
  return 2;
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
  double worst = -1;
  for (const auto& name : names) {
    const dpv::Tensor* x = a.find(name);
    const dpv::Tensor* y = b.find(name);
    if (!x || !y || !x->defined() || !y->defined() || x->numel() != y->numel()) continue;
    const std::vector<double> xs = x->to_doubles(), ys = y->to_doubles();
    for (size_t i = 0; i < xs.size(); ++i) worst = std::max(worst, std::fabs(xs[i] - ys[i]));
  }
  return worst < 0 ? BnLabModelStep::kNaN : worst;
}

BnLabSession::BnLabSession(const BnLabConfig& config)
    : config_(config), model_(bnlab_model_spec(config.bnMomentum)), data_(bnlab_dataset(config)) {
  for (int i = 0; i < model_.num_layers(); ++i)
    if (model_.layer(i).is_batchnorm()) bnLayers_.push_back(i);

  initial_ = model_.initial_state(config.seed);
  const dpv::TensorMap& initial = initial_;
  for (int which = 0; which < kBnLabDpModelCount; ++which) {
    dpv::TrainOptions options;
    options.lr = config.learningRate;
    options.momentum = config.sgdMomentum;
    options.sync_bn = which == BnLabSync;
    // Each model gets its own device set so the two DataParallel models never share worker
    // threads or memory counters; the reference always runs on one device with the whole batch.
    auto devices = dpv::DeviceSet::create(which == BnLabReference ? std::string("cpu:1") : config.devices);
    trainers_[static_cast<size_t>(which)] = std::make_unique<dpv::Trainer>(
        std::move(devices), dpv::Model(bnlab_model_spec(config.bnMomentum)), initial, options);
  }
  for (BnLabModel which : {BnLabDdpPerRank, BnLabDdpSync})
    ddpTrainers_[static_cast<size_t>(which - BnLabDdpPerRank)] = makeDdpTrainer(which);
  for (int layer : bnLayers_) {
    const std::string prefix = model_.layer_prefix(layer);
    emaMean_.push_back(initial.at(prefix + "running_mean").to_doubles());
    emaVar_.push_back(initial.at(prefix + "running_var").to_doubles());
  }
}

BnLabSession::~BnLabSession() = default;

std::unique_ptr<dpv::DdpTrainer> BnLabSession::makeDdpTrainer(BnLabModel which) const {
  dpv::DdpOptions options;
  options.lr = config_.learningRate;
  options.momentum = config_.sgdMomentum;
  options.sync_bn = which == BnLabDdpSync;
  // One in-process rank per device of the lab's spec, on a device set of its own.
  return std::make_unique<dpv::DdpTrainer>(dpv::DeviceSet::create(config_.devices),
                                           dpv::Model(bnlab_model_spec(config_.bnMomentum)), initial_, options);
}

int BnLabSession::deviceCount() const { return trainers_[BnLabPerDevice]->devices().size(); }

std::vector<std::string> BnLabSession::deviceLabels() const {
  std::vector<std::string> labels;
  const dpv::DeviceSet& set = trainers_[BnLabPerDevice]->devices();
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
  for (BnLabModel which : {BnLabPerDevice, BnLabSync, BnLabReference}) {
    const dpv::Trainer& real = trainer(which);
    try {
      dpv::Trainer copy(real.devices_ptr(), dpv::Model(real.model().spec()), initial_, real.options());
      dpv::Iteration iteration(copy, batch.inputs, batch.targets);
      iteration.run_to_end();
    } catch (const dpv::Error& e) {
      return {bnlab_model_name(which), e.full()};
    } catch (const std::exception& e) {
      return {bnlab_model_name(which), e.what()};
    }
  }
  for (BnLabModel which : {BnLabDdpPerRank, BnLabDdpSync}) {
    try {
      auto copy = makeDdpTrainer(which);
      dpv::DdpIteration iteration(*copy, batch.inputs, batch.targets);
      iteration.run_to_end();
    } catch (const dpv::Error& e) {
      return {bnlab_model_name(which), e.full()};
    } catch (const std::exception& e) {
      return {bnlab_model_name(which), e.what()};
    }
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

BnLabModelStep BnLabSession::runDdpModel(BnLabModel which, const dpv::Dataset& batch, std::vector<int64_t>& shards) {
  dpv::DdpTrainer& tr = ddpTrainer(which);
  // The lab's global batch, each rank training on its DistributedSampler shard (no shuffling: the
  // batch is already drawn at random).
  dpv::DdpIteration iteration(tr, batch.inputs, batch.targets);
  iteration.run_to_end();

  BnLabModelStep result;
  result.loss = iteration.mean_loss();  // what an all-reduced loss would print; each rank's own is local
  const std::vector<int64_t> targets = batch.targets.to_int64();  // [N]
  int64_t right = 0, rows = 0;
  shards.clear();
  for (int r = 0; r < tr.world_size(); ++r) {
    const auto& shard = iteration.shards()[static_cast<size_t>(r)];
    shards.push_back(static_cast<int64_t>(shard.size()));
    const dpv::Tensor& out = tr.rank(r).output();  // [n_r, classes]
    const std::vector<double> logits = out.to_doubles();
    const int64_t classes = out.dim(1);
    for (size_t k = 0; k < shard.size(); ++k) {
      const auto begin = logits.begin() + static_cast<int64_t>(k) * classes;
      right += std::max_element(begin, begin + classes) - begin == targets[static_cast<size_t>(shard[k])];
      ++rows;
    }
  }
  result.accuracy = rows ? static_cast<double>(right) / static_cast<double>(rows) : BnLabModelStep::kNaN;
  // Rank 0's BatchNorm statistics come with every rank's (and, with SyncBatchNorm, the global ones).
  const auto& all = iteration.batchnorm_stats();
  const dpv::DdpRank& rank0 = tr.rank(0);
  for (int layer : bnLayers_) {
    BnLabLayerStats stats = layerStats(layer, all);
    const std::string prefix = model_.layer_prefix(layer);
    stats.runningMean = rank0.buffers().at(prefix + "running_mean").to_doubles();
    stats.runningVar = rank0.buffers().at(prefix + "running_var").to_doubles();
    result.layers.push_back(std::move(stats));
  }
  return result;
}

BnLabModelStep BnLabSession::runModel(BnLabModel which, const dpv::Dataset& batch) {
  dpv::Trainer& tr = trainer(which);
  dpv::Iteration iteration(tr, batch.inputs, batch.targets);
  iteration.run_to_end();

  BnLabModelStep result;
  result.loss = iteration.loss();
  result.accuracy = dpv::course::accuracy(iteration.output(), batch.targets);
  const auto& all = iteration.batchnorm_stats();
  for (size_t slot = 0; slot < bnLayers_.size(); ++slot) {
    const int layer = bnLayers_[slot];
    BnLabLayerStats stats = layerStats(layer, all);
    const std::string prefix = model_.layer_prefix(layer);
    stats.runningMean = tr.state().at(prefix + "running_mean").to_doubles();
    stats.runningVar = tr.state().at(prefix + "running_var").to_doubles();
    if (which == BnLabPerDevice) updateDevice0Ema(stats, slot);
    result.layers.push_back(std::move(stats));
  }
  return result;
}

BnLabStep BnLabSession::step() {
  if (failed())
    throw dpv::Error("the lab stopped after an error in every model (first: " + failedModel_ + "); reset it to train again");
  BnLabStep out;
  const dpv::Dataset batch = bnlab_batch(data_, config_, steps_);
  out.chunks = dpv::chunk_sizes(config_.batchSize, deviceCount());
  // A model the engine refuses stops alone: the others still train on the same batches, so the
  // learner sees SyncBatchNorm go on where per-device BatchNorm cannot.
  for (BnLabModel which : {BnLabPerDevice, BnLabSync, BnLabReference, BnLabDdpPerRank, BnLabDdpSync}) {
    auto& result = out.models[static_cast<size_t>(which)];
    if (modelStopped(which)) {
      result.stopped = true;
      continue;
    }
    std::string error;
    try {
      result = bnlab_is_ddp(which) ? runDdpModel(which, batch, out.shards) : runModel(which, batch);
    } catch (const dpv::Error& e) {
      error = e.full();
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (error.empty()) continue;
    result = BnLabModelStep{};
    result.stopped = true;
    modelErrors_[static_cast<size_t>(which)] = error;
    modelStoppedAt_[static_cast<size_t>(which)] = steps_ + 1;
    if (failedModel_.empty()) {  // the first error, reported once every model has stopped
      failedModel_ = bnlab_model_name(which);
      firstError_ = error;
    }
  }
  const bool anyTraining = std::any_of(modelErrors_.begin(), modelErrors_.end(), [](const std::string& e) { return e.empty(); });
  if (!anyTraining) {
    failure_ = firstError_;
    throw dpv::Error("every model of the lab stopped; the first: " + failure_);
  }
  // Keep only the devices that held rows (chunk_sizes(0, k) gives k zeros).
  out.chunks.erase(std::remove(out.chunks.begin(), out.chunks.end(), int64_t{0}), out.chunks.end());

  std::vector<std::string> params;
  for (const auto& decl : model_.parameter_decls()) params.push_back(decl.name);
  dpv::Trainer& reference = trainer(BnLabReference);
  const bool referenceRuns = !modelStopped(BnLabReference);
  for (BnLabModel which : {BnLabPerDevice, BnLabSync}) {
    auto& m = out.models[static_cast<size_t>(which)];
    if (m.stopped || !referenceRuns) continue;
    m.paramDistance = bnlab_max_abs_difference(trainer(which).state(), reference.state(), params);
    m.gradDistance = bnlab_max_abs_difference(trainer(which).grads(), reference.grads(), params);
  }
  for (BnLabModel which : {BnLabDdpPerRank, BnLabDdpSync}) {
    // Rank 0's parameters and averaged gradients (every rank holds the same ones).
    auto& m = out.models[static_cast<size_t>(which)];
    if (m.stopped || !referenceRuns) continue;
    m.paramDistance = bnlab_max_abs_difference(ddpTrainer(which).rank(0).params(), reference.state(), params);
    m.gradDistance = bnlab_max_abs_difference(ddpTrainer(which).rank(0).grads(), reference.grads(), params);
  }
  out.step = ++steps_;
  return out;
}

}  // namespace gui
