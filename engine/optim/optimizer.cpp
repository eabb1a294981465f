#include "engine/optim/optimizer.h"

#include <algorithm>
#include <cmath>

#include "engine/backend.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/number_text.h"
#include "engine/strategy.h"

namespace dpv {
namespace {

bool is_adam(OptimizerKind kind) { return kind == OptimizerKind::Adam || kind == OptimizerKind::AdamW; }

constexpr const char* kMomentumBuffer = "momentum_buffer";
constexpr const char* kExpAvg = "exp_avg";
constexpr const char* kExpAvgSq = "exp_avg_sq";

}  // namespace

const char* optimizer_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::Sgd: return "sgd";
    case OptimizerKind::Adam: return "adam";
    case OptimizerKind::AdamW: return "adamw";
  }
  return "sgd";
}

const char* optimizer_class_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::Sgd: return "SGD";
    case OptimizerKind::Adam: return "Adam";
    case OptimizerKind::AdamW: return "AdamW";
  }
  return "SGD";
}

OptimizerKind parse_optimizer_kind(const std::string& name) {
  for (OptimizerKind kind : {OptimizerKind::Sgd, OptimizerKind::Adam, OptimizerKind::AdamW})
    if (name == optimizer_name(kind)) return kind;
  throw Error("unknown optimizer '" + name + "': choose sgd, adam or adamw", ErrorClass::ValueError);
}

void check_optimizer_settings(const OptimizerSettings& s) {
  // NaN fails every `0 <= x` test, as in Python.
  check_learning_rate(s.lr);
  check(s.momentum >= 0, "Invalid momentum value: " + python_float(s.momentum), ErrorClass::ValueError);
  check(s.weight_decay >= 0, "Invalid weight_decay value: " + python_float(s.weight_decay), ErrorClass::ValueError);
  if (!is_adam(s.kind)) return;
  check(s.eps >= 0, "Invalid epsilon value: " + python_float(s.eps), ErrorClass::ValueError);
  check(s.beta1 >= 0 && s.beta1 < 1, "Invalid beta parameter at index 0: " + python_float(s.beta1),
        ErrorClass::ValueError);
  check(s.beta2 >= 0 && s.beta2 < 1, "Invalid beta parameter at index 1: " + python_float(s.beta2),
        ErrorClass::ValueError);
}

std::vector<std::string> optimizer_state_names(const OptimizerSettings& s) {
  if (is_adam(s.kind)) return {"step", kExpAvg, kExpAvgSq};
  if (s.momentum != 0) return {kMomentumBuffer};
  return {};
}

std::string optimizer_state_label(const std::string& state_name) {
  return state_name == kMomentumBuffer ? "momentum" : state_name;
}

ParameterOptimizer::ParameterOptimizer(OptimizerSettings settings) : settings_(settings) {
  check_optimizer_settings(settings_);
}

const TensorMap& ParameterOptimizer::state(const std::string& state_name) const {
  auto it = state_.find(state_name);
  return it == state_.end() ? none_ : it->second;
}

Tensor& ParameterOptimizer::state_tensor(const std::string& state_name, const std::string& param, const Tensor& like,
                                         const std::shared_ptr<Device>& device, bool& created) {
  TensorMap& map = state_[state_name];
  Tensor* t = map.find(param);
  created = t == nullptr;
  if (created) {
    map.set(param, Tensor::zeros(like.shape(), like.dtype(), device));
    t = map.find(param);
  }
  return *t;
}

void ParameterOptimizer::step(const std::string& name, Tensor& param, const Tensor& grad, Backend& backend,
                              const std::shared_ptr<Device>& device) {
  int64_t& steps = steps_[name];
  ++steps;
  bool created = false;
  if (is_adam(settings_.kind)) {
    Tensor& exp_avg = state_tensor(kExpAvg, name, param, device, created);
    Tensor& exp_avg_sq = state_tensor(kExpAvgSq, name, param, device, created);
    const kernels::math::AdamStep adam{.lr = settings_.lr,
                                       .beta1 = settings_.beta1,
                                       .beta2 = settings_.beta2,
                                       .eps = settings_.eps,
                                       .weight_decay = settings_.weight_decay,
                                       .decoupled_weight_decay = settings_.kind == OptimizerKind::AdamW,
                                       .step = steps};
    backend.adam_update(param, grad, exp_avg, exp_avg_sq, adam);
    return;
  }
  Tensor none;
  if (settings_.momentum == 0) {  // torch.optim.SGD keeps no state without momentum
    backend.sgd_update(param, grad, none, settings_.lr, 0.0, settings_.weight_decay, true);
    return;
  }
  // The buffer starts as a clone of the first step's direction (first_step), not from zeros.
  Tensor& buf = state_tensor(kMomentumBuffer, name, param, device, created);
  backend.sgd_update(param, grad, buf, settings_.lr, settings_.momentum, settings_.weight_decay, created);
}

std::vector<std::pair<std::string, Tensor>> ParameterOptimizer::state_of(const std::string& param_name) const {
  std::vector<std::pair<std::string, Tensor>> out;
  auto steps = steps_.find(param_name);
  if (steps == steps_.end()) return out;
  for (const std::string& state_name : optimizer_state_names(settings_)) {
    if (state_name == "step") {
      out.emplace_back(state_name, Tensor::full({}, DType::Float32, static_cast<double>(steps->second)));
      continue;
    }
    if (const Tensor* t = state(state_name).find(param_name)) out.emplace_back(state_name, *t);
  }
  return out;
}

void ParameterOptimizer::set_state(const std::string& param_name, const std::string& state_name, const Tensor& value) {
  const std::vector<std::string> names = optimizer_state_names(settings_);
  check(std::find(names.begin(), names.end(), state_name) != names.end(),
        std::string(optimizer_class_name(settings_.kind)) + " keeps no state '" + state_name + "' (parameter '" +
            param_name + "')",
        ErrorClass::ValueError);
  if (state_name == "step") {
    check(value.numel() == 1, "optimizer state 'step' of '" + param_name + "' must hold one value");
    const double steps = value.to_doubles().at(0);
    check(steps >= 0 && steps == std::floor(steps), "optimizer state 'step' of '" + param_name +
                                                        "' must be a whole number of steps, not " + python_float(steps));
    steps_[param_name] = static_cast<int64_t>(steps);
    return;
  }
  state_[state_name].set(param_name, value);
  steps_.try_emplace(param_name, 0);
}

int64_t ParameterOptimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& [state_name, map] : state_)
    for (const auto& [param, t] : map.items()) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

}  // namespace dpv
