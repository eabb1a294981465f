#pragma once
// torch.optim.SGD, Adam and AdamW over named parameters (PyTorch 1.13's single-tensor paths), one
// implementation every strategy steps with: DataParallel on device 0, each DDP rank on its replica,
// and the sharded strategies on the parameters or the flat slice a rank owns. The state of each
// parameter is created lazily at its first step, under PyTorch's state-dict names
// (`momentum_buffer`; `step`, `exp_avg`, `exp_avg_sq`), so it can be listed, saved and compared.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "engine/tensor_map.h"

namespace dpv {

class Backend;
class Device;

enum class OptimizerKind : uint8_t { Sgd, Adam, AdamW };

// The name the CLI takes and messages print: "sgd", "adam", "adamw".
const char* optimizer_name(OptimizerKind kind);
// PyTorch's class name: "SGD", "Adam", "AdamW".
const char* optimizer_class_name(OptimizerKind kind);
// Throws dpv::Error (ValueError) naming the choices for any other name.
OptimizerKind parse_optimizer_kind(const std::string& name);

// The optimizer's constructor arguments. Defaults are SGD's in dpviz (lr 0.01) and Adam's own
// betas and eps; AdamW's weight decay is whatever the caller sets (PyTorch's default is 1e-2).
struct OptimizerSettings {
  OptimizerKind kind = OptimizerKind::Sgd;
  double lr = 0.01;
  double momentum = 0.0;       // SGD only
  double weight_decay = 0.0;   // SGD and Adam: L2 added to the gradient; AdamW: decoupled
  double beta1 = 0.9;          // Adam/AdamW
  double beta2 = 0.999;
  double eps = 1e-8;
  bool operator==(const OptimizerSettings&) const = default;
};

// PyTorch's constructor checks, with its messages (ValueError): "Invalid learning rate: -1.0",
// "Invalid momentum value: ...", "Invalid weight_decay value: ...", "Invalid beta parameter at
// index 0: 1.0", "Invalid epsilon value: ...".
void check_optimizer_settings(const OptimizerSettings& settings);

// The state tensors the optimizer keeps per parameter, in PyTorch's order.
std::vector<std::string> optimizer_state_names(const OptimizerSettings& settings);

// How a state tensor is named beside its parameter in pictures and listings: "momentum" for SGD's
// momentum_buffer, the state's own name (exp_avg, exp_avg_sq) otherwise.
std::string optimizer_state_label(const std::string& state_name);

class ParameterOptimizer {
 public:
  explicit ParameterOptimizer(OptimizerSettings settings);

  const OptimizerSettings& settings() const { return settings_; }
  void set_learning_rate(double lr) { settings_.lr = lr; }

  // One step of parameter `name` (param and grad on `device`, same shape and dtype), creating its
  // state on `device` at its first step. Does not synchronise the backend.
  void step(const std::string& name, Tensor& param, const Tensor& grad, Backend& backend,
            const std::shared_ptr<Device>& device);

  // A state tensor of every parameter stepped so far, keyed by the parameter's name:
  // state("momentum_buffer"), state("exp_avg"), state("exp_avg_sq"). Empty for a state this
  // optimizer does not keep. `step` lives in steps() (PyTorch keeps it as a float tensor).
  const TensorMap& state(const std::string& state_name) const;
  // How many steps each parameter has taken (Adam's bias correction counts per parameter).
  const std::map<std::string, int64_t>& steps() const { return steps_; }
  // Every state tensor of `param_name` under PyTorch's names, `step` as a one-element float32
  // host tensor of shape [] (what torch.optim's state_dict holds); empty before its first step.
  std::vector<std::pair<std::string, Tensor>> state_of(const std::string& param_name) const;
  // Restores one parameter's state (a checkpoint): each name must be one of this optimizer's.
  void set_state(const std::string& param_name, const std::string& state_name, const Tensor& value);
  // Every state tensor held (not `step`), state by state in PyTorch's order, parameters in the order
  // they were first stepped: fn(state_name, param_name, tensor).
  template <typename Fn>
  void for_each_state_tensor(Fn&& fn) const {
    for (const std::string& state_name : optimizer_state_names(settings_))
      for (const auto& [param, t] : state(state_name).items()) fn(state_name, param, t);
  }
  // Bytes of every state tensor held (the memory accounts' optimizer state).
  int64_t state_bytes() const;

 private:
  Tensor& state_tensor(const std::string& state_name, const std::string& param, const Tensor& like,
                       const std::shared_ptr<Device>& device,
                       bool& created);

  OptimizerSettings settings_;
  std::map<std::string, TensorMap> state_;  // state name -> parameter name -> tensor
  std::map<std::string, int64_t> steps_;    // parameter name -> steps taken
  TensorMap none_;                          // what state() returns for a state not kept
};

}  // namespace dpv
