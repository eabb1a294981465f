#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/index.h"
#include "engine/layer.h"
#include "engine/model_spec.h"
#include "engine/tensor_map.h"

namespace dpv {

// An nn.Sequential of layers with a loss. State-dict names follow PyTorch: "<index>.<name>",
// each layer's parameters then its buffers, layers in order.
class Model {
 public:
  explicit Model(ModelSpec spec);
  const ModelSpec& spec() const { return spec_; }
  DType dtype() const { return spec_.dtype; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  Layer& layer(int i) const { return *layers_.at(ix(i)); }
  std::string layer_prefix(int i) const { return std::to_string(i) + "."; }
  // Full names, registration order; built once with the model (every training step reads them).
  const std::vector<TensorDecl>& parameter_decls() const& { return parameter_decls_; }
  const std::vector<TensorDecl>& buffer_decls() const& { return buffer_decls_; }
  const std::vector<TensorDecl>& state_decls() const& { return state_decls_; }  // state_dict order
  // The lists live in the model: on a temporary (`for (d : Model(spec).parameter_decls())`) they
  // would be read after the model is gone, so that does not compile.
  void parameter_decls() const&& = delete;
  void buffer_decls() const&& = delete;
  void state_decls() const&& = delete;
  // A fresh host state dict initialised from `seed`.
  TensorMap initial_state(uint64_t seed) const;
  // Checks a loaded state dict: every name present, shapes and dtypes right; throws naming the problem.
  void check_state(const TensorMap& state) const;
  // Checks an input batch against the model the way PyTorch would fail: dtype mismatch in
  // PyTorch's words, shapes that do not fit (naming both), an empty batch.
  void check_input(const Tensor& input) const;
  // Shapes of every layer's output for an input shape.
  std::vector<Shape> activation_shapes(const Shape& input) const;
  std::string describe() const;  // Sequential( (0): Linear(...) ... )
  std::string describe_short() const;  // "Sequential(Linear, ReLU, ...)"

 private:
  ModelSpec spec_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<TensorDecl> parameter_decls_, buffer_decls_, state_decls_;
};

// Bytes of the model's parameters whose state-dict names begin with `name_prefix` ("6." for one
// layer's), all of them when it is empty: what a full copy of those parameters (or their
// gradients) moves.
int64_t parameter_bytes(const Model& model, const std::string& name_prefix = "");

}  // namespace dpv
