#pragma once
// Internal helpers shared by the scenario runners (not part of the course API): parameter access,
// model and batch construction, and one recorded DataParallel iteration.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "course/scenario.h"
#include "engine/data_parallel.h"
#include "engine/ddp/ddp.h"
#include "engine/model_spec.h"
#include "engine/observer.h"

namespace dpv::course::detail {

using nlohmann::json;

// Scenario parameters, already checked by scenario_problem (so lookups here do not fail).
struct Params {
  json j;
  int integer(const char* key, int fallback = 0) const { return j.contains(key) ? j.at(key).get<int>() : fallback; }
  bool flag(const char* key, bool fallback = false) const { return j.contains(key) ? j.at(key).get<bool>() : fallback; }
  std::string text(const char* key, const std::string& fallback = {}) const {
    return j.contains(key) ? j.at(key).get<std::string>() : fallback;
  }
  std::vector<int64_t> ints(const char* key) const {
    return j.contains(key) ? j.at(key).get<std::vector<int64_t>>() : std::vector<int64_t>{};
  }
};

// The model a scenario names: "model" (a model spec object) or "preset"; `fallback` otherwise.
ModelSpec scenario_model(const Params& p, const std::string& fallback_preset);

// Records every stage event of an iteration.
struct Recorder : Observer {
  std::vector<StageEvent> events;
  void on_stage(const StageEvent& e) override { events.push_back(e); }
};

// A deterministic batch: input of `shape` (values ~ N(0,1) plus `row_ramp` * row index, so
// chunks can be made to differ), targets in [0, classes).
Tensor make_input(const Shape& shape, DType dtype, uint64_t seed, double row_ramp = 0.0);
Tensor make_targets(int64_t n, int classes, uint64_t seed);
// Classes the model's output has, for an input shape (last dim of the last activation).
int model_classes(const ModelSpec& spec, const Shape& input_shape);

// One training iteration on "cpu:<devices>" recorded stage by stage.
struct IterationRun {
  std::shared_ptr<DeviceSet> devices;
  std::unique_ptr<Trainer> trainer;
  std::unique_ptr<Iteration> iteration;
  Recorder recorder;
  std::vector<StageKind> plan;     // the plan's stage kinds, in order
  std::vector<int64_t> chunks;
  std::string error;               // dpv::Error::full() of the failure, empty when it ran through
  std::string error_stage;         // the stage that failed ("construct" when the batch was refused)
  TensorMap initial_state;         // host copy of the state before the step
};
// Runs the iteration up to and including the first stage of kind `stop_after` (all of it when
// not given). Engine errors are caught into `error`.
std::unique_ptr<IterationRun> run_iteration(int devices, const ModelSpec& spec, const Tensor& input, const Tensor& target,
                                            const TrainOptions& options, uint64_t seed = 7,
                                            std::optional<StageKind> stop_after = std::nullopt);

// DistributedDataParallel on "cpu:<devices>" (in-process ranks): `iterations` iterations on the
// same global batch, the last one recorded stage by stage (DistributedSampler without shuffling,
// as `dpv step --ddp`). Engine errors propagate.
struct DdpRun {
  std::shared_ptr<DeviceSet> devices;
  std::unique_ptr<DdpTrainer> trainer;
  std::unique_ptr<DdpIteration> iteration;  // the last iteration
  Recorder recorder;                        // its stage events
  TensorMap initial_state;                  // host copy of the state before the first step
};
std::unique_ptr<DdpRun> run_ddp(int devices, const ModelSpec& spec, const Tensor& input, const Tensor& target,
                                const DdpOptions& options, int iterations = 1, uint64_t seed = 7);

// The global batch the DDP and ZeRO scenarios train on: rows of the model's input width (its first
// layer must be Linear), targets in its classes (scenario_ddp.cpp).
struct Batch {
  Tensor input, target;
};
Batch ddp_batch(const ModelSpec& spec, int batch, uint64_t seed);

// DDP (stage 0) or ZeRO-`stage` (1: ZeroRedundancyOptimizer, 2: FSDP SHARD_GRAD_OP, 3: FULL_SHARD) on
// "cpu:<devices>": `iterations` iterations on the same global batch, the last one recorded stage by
// stage with every rank's memory by kind (scenario_zero.cpp). Engine errors propagate.
struct ZeroRun {
  std::shared_ptr<DeviceSet> devices;
  std::unique_ptr<DdpTrainer> trainer;
  Recorder recorder;  // the last iteration's stage events
};
std::unique_ptr<ZeroRun> run_zero(int devices, const ModelSpec& spec, const Batch& batch, int stage,
                                  const OptimizerSettings& optimizer, int iterations = 1);
// The scenarios' optimizer: "sgd" (momentum 0.9), "adam" (the default) or "adamw".
OptimizerSettings zero_optimizer(const Params& p);
// The model's parameters after the run, put together on the host: rank 0's own under DDP and
// ZeRO-1 (the broadcast left every rank all of them), every rank's flat slice under FSDP.
TensorMap full_parameters(const ZeroRun& run);

// Rows `indices` of a host batch (input [N, ...] or int64 target [N]): what one rank trains on.
Tensor take_rows(const Tensor& batch, const std::vector<int64_t>& indices);
// max |a - b| over the names both maps hold (0 when none).
double max_difference(const TensorMap& a, const TensorMap& b);
// max |x| over a map's tensors.
double max_magnitude(const TensorMap& m);

// BatchNorm1d(features) then Linear(features, 2): the BatchNorm scenarios' model, so the
// statistics are those of the raw input rows.
ModelSpec batchnorm_scenario_model(int features);

bool plan_has(const std::vector<StageKind>& plan, StageKind kind);
std::string join_ints(const std::vector<int64_t>& v, const char* sep = ",");
std::string format_values(const std::vector<double>& v, int max_count = 4);

// The individual scenarios (scenario_runs.cpp, scenario_batchnorm.cpp).
ScenarioResult run_scatter(const Params& p);
ScenarioResult run_output_shape(const Params& p);
ScenarioResult run_dtype_mismatch(const Params& p);
ScenarioResult run_gradients(const Params& p);
ScenarioResult run_loss_in_model(const Params& p);
ScenarioResult run_memory(const Params& p);
ScenarioResult run_plan(const Params& p);
ScenarioResult run_batchnorm(const Params& p);
// DDP (scenario_ddp.cpp, scenario_ddp_state.cpp).
ScenarioResult run_sampler(const Params& p);
ScenarioResult run_ddp_loss(const Params& p);
ScenarioResult run_ddp_gradients(const Params& p);
ScenarioResult run_ddp_buffers(const Params& p);
ScenarioResult run_ddp_memory(const Params& p);
ScenarioResult run_ddp_buckets(const Params& p);
// A restart from a checkpoint (scenario_ddp_resume.cpp).
ScenarioResult run_ddp_resume(const Params& p);
// ZeRO and FSDP: partition, flat layout and traffic (scenario_zero.cpp), what each rank holds
// (scenario_zero_state.cpp).
ScenarioResult run_zero_layout(const Params& p);
ScenarioResult run_zero_traffic(const Params& p);
ScenarioResult run_zero_state(const Params& p);
// What a link costs an all-reduce, and what a comm hook sends (scenario_network.cpp).
ScenarioResult run_network_cost(const Params& p);

}  // namespace dpv::course::detail
