#pragma once
// Layers hold configuration only; tensors live in a replica (parameters, buffers, gradients,
// saved context), so one Layer object serves every replica, as one module class serves every
// replica made by torch.nn.parallel.replicate. Each layer has an explicit forward and backward.
#include <memory>
#include <string>
#include <vector>

#include "engine/model_spec.h"
#include "engine/tensor.h"
#include "engine/tensor_map.h"

namespace dpv {

class Backend;
class Device;
class Rng;

struct TensorDecl {
  std::string name;  // relative: "weight", "running_mean"
  Shape shape;
  DType dtype;
};

// What a layer saves between its forward and its backward on one replica.
struct LayerCache {
  Tensor input;    // x
  Tensor output;   // y
  Tensor aux;      // conv: the backend's saved columns (im2col path only); bn: mean
  Tensor aux2;     // bn: invstd
  Tensor var_b;    // bn: biased variance of the normalised batch (per device, or global with sync)
  double count = 0;  // bn: elements per channel that normalised (total count under sync)
  // BatchNorm + ReLU in one pass (LayerRun::fuse_next_relu): on the BatchNorm, the ReLU's output
  // it wrote (its sign masks the gradient in the fused backward); on the ReLU, that its input
  // already is its output, so its forward and backward pass the tensor through.
  Tensor relu_output;
  bool relu_fused = false;
};

// Everything one replica owns. Replica 0's params alias the original's storage and its buffers
// are the original's buffers; other replicas hold copies made by Replicate.
struct Replica {
  std::shared_ptr<Device> device;
  TensorMap params;
  TensorMap buffers;
  TensorMap grads;                  // this replica's gradients, before the reduce
  // Optional: where a parameter's gradient is made when its slot is created, instead of a new
  // tensor (DDP's bucket views, so the backward writes straight into the bucket). Same shapes.
  TensorMap grad_homes;
  std::vector<LayerCache> caches;   // one per layer
};

struct LayerRun {
  Backend& backend;
  Replica& replica;
  LayerCache& cache;
  std::string prefix;  // "3." for layer 3
  bool training = true;
  bool need_input_grad = true;  // false for the first layer: the batch needs no gradient
  // BatchNorm only: the next layer is a ReLU and nobody looks at the BatchNorm's own output, so
  // the BatchNorm applies the ReLU in the same pass (forward and backward).
  bool fuse_next_relu = false;
  // ReLU only: the BatchNorm before it already applied it (fuse_next_relu); pass through.
  bool relu_done_before = false;
  Tensor& param(const std::string& n) { return replica.params.at(prefix + n, "the replica's parameters"); }
  Tensor& buffer(const std::string& n) { return replica.buffers.at(prefix + n, "the replica's buffers"); }
  // The gradient slot for a parameter, allocated zeroed on first use.
  Tensor& grad(const std::string& n);
  // Same, but a slot allocated now is left uninitialised and `fresh` says so: the caller then
  // overwrites it (beta = 0) instead of accumulating, saving a pass over the weights.
  Tensor& grad(const std::string& n, bool& fresh);
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual LayerKind kind() const = 0;         // what front ends decide on (never type()'s text)
  virtual std::string type() const = 0;       // "Linear", "BatchNorm1d", ...
  virtual std::string describe() const = 0;   // PyTorch's repr: "Linear(in_features=10, out_features=2, bias=True)"
  virtual std::vector<TensorDecl> parameters(DType) const { return {}; }
  virtual std::vector<TensorDecl> buffers(DType) const { return {}; }
  // The output shape for an input shape; throws dpv::Error naming both shapes when they do not fit.
  virtual Shape output_shape(const Shape& input) const = 0;
  // Fills freshly allocated host parameters/buffers with PyTorch's default initialisation scheme
  // (kaiming-uniform bounds for weights and biases, ones/zeros for BatchNorm).
  virtual void initialise(TensorMap& state, const std::string& prefix, Rng& rng) const;
  virtual Tensor forward(LayerRun& run, const Tensor& x) = 0;
  virtual Tensor backward(LayerRun& run, const Tensor& dy) = 0;  // returns dx; accumulates param grads
  virtual bool is_batchnorm() const { return false; }
  virtual bool is_relu() const { return false; }
};

std::unique_ptr<Layer> make_layer(const LayerSpec& spec);

}  // namespace dpv
