#include "engine/model.h"

#include <sstream>

#include "engine/datasets.h"
#include "engine/error.h"
#include "engine/layers/simple_layers.h"

namespace dpv {

Model::Model(ModelSpec spec) : spec_(std::move(spec)) {
  check(!spec_.layers.empty(), "the model has no layers", ErrorClass::ValueError);
  check(spec_.dtype != DType::Int64, "a model's dtype must be float32 or float64", ErrorClass::ValueError);
  for (const auto& l : spec_.layers) layers_.push_back(make_layer(l));
  for (int i = 0; i < num_layers(); ++i) {
    for (auto d : layer(i).parameters(spec_.dtype)) {
      parameter_decls_.push_back({layer_prefix(i) + d.name, d.shape, d.dtype});
      state_decls_.push_back(parameter_decls_.back());
    }
    for (auto d : layer(i).buffers(spec_.dtype)) {
      buffer_decls_.push_back({layer_prefix(i) + d.name, d.shape, d.dtype});
      state_decls_.push_back(buffer_decls_.back());
    }
  }
}

int64_t parameter_bytes(const Model& model, const std::string& name_prefix) {
  int64_t bytes = 0;
  for (const auto& d : model.parameter_decls())
    if (d.name.rfind(name_prefix, 0) == 0) bytes += shape_numel(d.shape) * static_cast<int64_t>(dtype_size(d.dtype));
  return bytes;
}

TensorMap Model::initial_state(uint64_t seed) const {
  TensorMap state;
  for (const auto& d : state_decls()) state.set(d.name, Tensor::zeros(d.shape, d.dtype));
  Rng rng(seed);
  for (int i = 0; i < num_layers(); ++i) layer(i).initialise(state, layer_prefix(i), rng);
  return state;
}

void Model::check_state(const TensorMap& state) const {
  for (const auto& d : state_decls()) {
    const Tensor* t = state.find(d.name);
    if (!t)
      throw Error("Missing key(s) in state_dict: \"" + d.name + "\" (the model " + describe_short() +
                      " expects it; check the parameter names, e.g. a 'module.' prefix from a DataParallel checkpoint)",
                  ErrorClass::KeyError);
    check(t->shape() == d.shape, "size mismatch for " + d.name + ": copying a param with shape " +
                                     torch_size_str(t->shape()) + " from checkpoint, the shape in current model is " +
                                     torch_size_str(d.shape) + ".");
    check(t->dtype() == d.dtype, "dtype mismatch for " + d.name + ": the state file holds " + dtype_name(t->dtype()) +
                                     " but the model is " + dtype_name(d.dtype));
  }
  for (const auto& [name, t] : state.items()) {
    bool known = false;
    for (const auto& d : state_decls()) known = known || d.name == name;
    if (!known) throw Error("Unexpected key(s) in state_dict: \"" + name + "\"", ErrorClass::KeyError);
  }
}

std::string Model::describe_short() const {
  std::string s;
  for (int i = 0; i < num_layers(); ++i) s += (i ? ", " : "") + layer(i).type();
  return "Sequential(" + s + ")";
}

std::vector<Shape> Model::activation_shapes(const Shape& input) const {
  std::vector<Shape> shapes;
  Shape s = input;
  for (int i = 0; i < num_layers(); ++i) {
    try {
      s = layer(i).output_shape(s);
    } catch (const Error& e) {
      throw e.reworded(std::string(e.what()) + " (layer " + std::to_string(i) + ": " + layer(i).describe() +
                       ", input " + shape_str(shapes.empty() ? input : shapes.back()) + ")");
    }
    shapes.push_back(s);
  }
  return shapes;
}

void Model::check_input(const Tensor& input) const {
  check(input.ndim() >= 1, "the input must have a batch dimension; got a 0-dimensional tensor", ErrorClass::ValueError);
  check(input.dim(0) > 0, "empty batch: the input " + shape_str(input.shape()) +
                              " has no samples; a training step needs at least one sample",
        ErrorClass::ValueError);
  check(input.dtype() != DType::Int64, "the input is int64; convert it to " + std::string(dtype_name(spec_.dtype)) +
                                           " (e.g. x.float()) before the forward pass");
  if (input.dtype() != spec_.dtype) {
    // The first layer with weights raises PyTorch's message for its op.
    for (int i = 0; i < num_layers(); ++i)
      if (!layer(i).parameters(spec_.dtype).empty())
        throw Error(dtype_mismatch_message(layer(i).type(), input.dtype(), spec_.dtype) + " (the input is " +
                        dtype_name(input.dtype()) + ", the model is " + dtype_name(spec_.dtype) + ")");
    throw Error("the input is " + std::string(dtype_name(input.dtype())) + " but the model is " +
                dtype_name(spec_.dtype));
  }
  activation_shapes(input.shape());
}

std::string Model::describe() const {
  std::ostringstream os;
  os << "Sequential(\n";
  for (int i = 0; i < num_layers(); ++i) os << "  (" << i << "): " << layer(i).describe() << "\n";
  os << ")";
  return os.str();
}

}  // namespace dpv
