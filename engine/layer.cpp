#include "engine/layer.h"

#include "engine/backend.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/layers/batchnorm.h"
#include "engine/layers/simple_layers.h"

namespace dpv {

Tensor& LayerRun::grad(const std::string& n) {
  bool fresh = false;
  Tensor& g = grad(n, fresh);
  if (fresh) backend.fill(g, 0.0);
  return g;
}

Tensor& LayerRun::grad(const std::string& n, bool& fresh) {
  const std::string full = prefix + n;
  fresh = false;
  if (Tensor* g = replica.grads.find(full)) return *g;
  if (const Tensor* home = replica.grad_homes.find(full)) {
    replica.grads.set(full, *home);
  } else {
    const Tensor& p = param(n);
    replica.grads.set(full, Tensor::empty(p.shape(), p.dtype(), replica.device));
  }
  fresh = true;
  return replica.grads.at(full);
}

void Layer::initialise(TensorMap&, const std::string&, Rng&) const {}

std::unique_ptr<Layer> make_layer(const LayerSpec& spec) {
  switch (spec.kind) {
    case LayerKind::Linear: return std::make_unique<Linear>(spec);
    case LayerKind::ReLU: return std::make_unique<ReLU>();
    case LayerKind::Flatten: return std::make_unique<Flatten>();
    case LayerKind::Conv2d: return std::make_unique<Conv2d>(spec);
    case LayerKind::BatchNorm1d:
    case LayerKind::BatchNorm2d: return std::make_unique<BatchNorm>(spec);
  }
  throw Error("unknown layer kind " + std::to_string(static_cast<int>(spec.kind)), ErrorClass::ValueError);
}

}  // namespace dpv
