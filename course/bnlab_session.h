#pragma once
// The BatchNorm lab's training, without Qt: five models from one seed (per-device BatchNorm and
// SyncBatchNorm under DataParallel, a single-device reference, per-rank BatchNorm and SyncBatchNorm
// under DistributedDataParallel), fed the same global batches, one step at a time. Each model is a
// dpv::RunSpec (bnlab_run_spec: strategy, sync_bn, devices) built with make_strategy and stepped
// through the one Strategy interface. The app's lab worker (gui/bnlab/worker.h) drives it on its
// own thread; tests drive it directly.
#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "course/bnlab_types.h"
#include "engine/data_parallel.h"
#include "engine/datasets.h"
#include "engine/ddp/ddp.h"
#include "engine/run/run_spec.h"

namespace dpv::course {

// The model the lab trains: the "mlp-bn" preset (2-16-BN-ReLU-16-BN-ReLU-2) with the lab's
// BatchNorm momentum.
dpv::ModelSpec bnlab_model_spec(double bnMomentum);

// What model `which` of the lab runs: its strategy, whether its BatchNorm is synchronised, its
// devices (the reference: one device with the whole batch), and the lab's optimizer, model and seed.
dpv::RunSpec bnlab_run_spec(const BnLabConfig& config, BnLabModel which);

// The lab's data set: a two-arm spiral generated from the seed.
dpv::Dataset bnlab_dataset(const BnLabConfig& config);

// The batch of step `step` (0-based): `batchSize` distinct rows drawn from the seed and the step,
// sorted by class (dpv::sort_by_class) when config.classSorted. A pure function, so tests can
// rebuild any batch the lab used.
dpv::Dataset bnlab_batch(const dpv::Dataset& data, const BnLabConfig& config, int64_t step);

// course::max_abs_difference (course/tensor_difference.h), NaN when no tensor is shared: how the lab
// shows "no distance".
double bnlab_max_abs_difference(const dpv::TensorMap& a, const dpv::TensorMap& b,
                                const std::vector<std::string>& names);

class BnLabSession {
 public:
  // Builds the devices and the five models; throws dpv::Error (bad device spec, no CUDA, ...).
  explicit BnLabSession(const BnLabConfig& config);
  ~BnLabSession();

  const BnLabConfig& config() const { return config_; }
  const dpv::Model& model() const { return model_; }
  const std::vector<int>& batchnormLayers() const { return bnLayers_; }
  int64_t stepsTaken() const { return steps_; }
  // The device labels of the DataParallel models' set ("GPU 1 (simulated on CPU)").
  std::vector<std::string> deviceLabels() const;
  int deviceCount() const;

  // One training step of the five models on the next batch. A model the engine refuses (the
  // per-device model on a one-sample chunk: "ValueError: Expected more than 1 value per channel")
  // stops there, its values NaN and `stopped` from then on, while the others go on training;
  // `modelStopped()` says so and `modelError()` holds the engine's text. Only when every model has stopped is
  // the session failed: `failed()` is true, `failure()` holds the first error, further steps throw.
  BnLabStep step();
  // The global batch of the next steps, taken while the lab trains (as TensorFlow Playground takes
  // its settings): the models keep their weights and the next step draws `rows` rows. Throws
  // dpv::Error (ValueError) for rows < 1.
  void setBatchSize(int64_t rows);
  // The learning rate of every model's next step (Strategy::set_learning_rate), taken the same way:
  // the five keep their weights and momentum. Throws dpv::Error (ValueError) for lr < 0 or not finite.
  void setLearningRate(double lr);
  bool failed() const { return !failure_.empty(); }
  bool modelStopped(BnLabModel which) const { return !modelErrors_[static_cast<size_t>(which)].empty(); }
  // The engine's text for a stopped model ("" while it trains).
  const std::string& modelError(BnLabModel which) const { return modelErrors_[static_cast<size_t>(which)]; }
  int64_t modelStoppedAt(BnLabModel which) const { return modelStoppedAt_[static_cast<size_t>(which)]; }
  // Runs the first batch through throwaway copies of the five models (the real ones are not
  // touched) and returns the first engine error, so the page can show it before training starts:
  // {model name, "ValueError: ..."}; both empty when the settings train fine.
  std::pair<std::string, std::string> probeFirstStep();
  const std::string& failure() const { return failure_; }
  const std::string& failedModel() const { return failedModel_; }

  // The models, for tests that compare against an independent computation: any model as a
  // strategy, the DataParallel models and the reference as Trainers, the DDP models as DdpTrainers.
  dpv::Strategy& strategy(BnLabModel which) { return *models_.at(static_cast<size_t>(which)); }
  dpv::Trainer& trainer(BnLabModel which) { return dynamic_cast<dpv::Trainer&>(strategy(which)); }
  dpv::DdpTrainer& ddpTrainer(BnLabModel which) { return dynamic_cast<dpv::DdpTrainer&>(strategy(which)); }
  const dpv::Dataset& dataset() const { return data_; }

 private:
  // One step of one model on the batch; `shards` takes a DDP model's rows per rank.
  BnLabModelStep runModel(BnLabModel which, const dpv::Dataset& batch, std::vector<int64_t>& shards);
  // A layer's statistics from an iteration's list: per device (or rank) and the global ones.
  BnLabLayerStats layerStats(int layer, const std::vector<dpv::BatchNormStats>& all) const;
  void updateDevice0Ema(BnLabLayerStats& stats, size_t layerSlot);
  // Records a model's engine error: it stops, and the first one is what a failed session reports.
  void stopModel(BnLabModel which, const std::string& error);
  // Each model's distance to the reference after this step's update.
  void measureDistances(BnLabStep& out);

  BnLabConfig config_;
  dpv::Model model_;
  dpv::Dataset data_;
  dpv::TensorMap initial_;  // the state every model starts from (host)
  std::vector<int> bnLayers_;
  std::vector<std::string> params_;  // the model's parameter names
  std::array<std::unique_ptr<dpv::Strategy>, kBnLabModelCount> models_;
  // Device 0's chunk statistics folded with the BatchNorm update rule, per BatchNorm layer.
  std::vector<std::vector<double>> emaMean_, emaVar_;
  int64_t steps_ = 0;
  std::array<std::string, kBnLabModelCount> modelErrors_;  // why each stopped model stopped
  std::array<int64_t, kBnLabModelCount> modelStoppedAt_{};  // the step (1-based) it stopped at
  std::string failure_;      // set once every model has stopped
  std::string failedModel_;  // the model that stopped first
  std::string firstError_;   // and its error
};

}  // namespace dpv::course
