#include "engine/layer.h"

#include "engine/backend.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/layers/batchnorm.h"
#include "engine/layers/simple_layers.h"

namespace dpv {

Tensor& LayerRun::grad(const std::string& n) {
  const std::string full = prefix + n;
  if (Tensor* g = replica.grads.find(full)) return *g;
  const Tensor& p = param(n);
  replica.grads.set(full, Tensor::zeros(p.shape(), p.dtype(), replica.device));
  return replica.grads.at(full);
}

Tensor& LayerRun::grad(const std::string& n, bool& fresh) {
  const std::string full = prefix + n;
  fresh = false;
  if (Tensor* g = replica.grads.find(full)) return *g;
  const Tensor& p = param(n);
  replica.grads.set(full, Tensor::empty(p.shape(), p.dtype(), replica.device));
  fresh = true;
  return replica.grads.at(full);
}

void Layer::initialise(TensorMap&, const std::string&, Rng&) const {}

std::unique_ptr<Layer> make_layer(const LayerSpec& spec) {
  if (spec.type == "linear") return std::make_unique<Linear>(spec);
  if (spec.type == "relu") return std::make_unique<ReLU>();
  if (spec.type == "flatten") return std::make_unique<Flatten>();
  if (spec.type == "conv2d") return std::make_unique<Conv2d>(spec);
  if (spec.type == "batchnorm1d" || spec.type == "batchnorm2d") return std::make_unique<BatchNorm>(spec);
  throw Error("unknown layer type '" + spec.type + "': use linear, relu, flatten, conv2d, batchnorm1d or batchnorm2d",
              "ValueError");
}

}  // namespace dpv
