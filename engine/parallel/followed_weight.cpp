// One weight element followed through ReduceGrads and Step for the snapshots: the replicas'
// gradients, their sum, what one device computes from the whole batch, the weight before and after.
#include "engine/backend.h"
#include "engine/error.h"
#include "engine/index.h"
#include "engine/parallel/iteration_impl.h"

namespace dpv {

namespace {
double element(const Tensor& t, int64_t index) { return t.to_doubles(ix(index + 1)).back(); }
}  // namespace

void Iteration::Impl::weight_before_stage(StageKind kind) {
  const auto decls = tr.model().parameter_decls();
  if (decls.empty()) return;
  if (weight.param.empty()) {
    weight.param = decls.front().name;
    weight.index = 0;
  }
  if (kind == StageKind::ReduceGrads) {
    weight.replica_grads.clear();
    for (int j = 0; j < R; ++j) {
      const Tensor* g = replicas[ix(j)].grads.find(weight.param);
      weight.replica_grads.push_back(g ? element(*g, weight.index) : 0.0);
    }
  } else if (kind == StageKind::Step) {
    if (weight.replica_grads.empty()) {  // one device: no reduce stage, replica 0's gradient is the gradient
      if (const Tensor* g = replicas[0].grads.find(weight.param)) weight.replica_grads = {element(*g, weight.index)};
    }
    weight.weight_before = element(tr.state().at(weight.param), weight.index);
    if (!weight.single_device_grad) weight.single_device_grad = single_device_gradient();  // before the update
  }
}

void Iteration::Impl::weight_after_stage(StageEvent& e) {
  const StageKind kind = e.stage.kind;
  if (weight.param.empty() || (kind != StageKind::ReduceGrads && kind != StageKind::Step)) return;
  if (const Tensor* g = tr.grads().find(weight.param)) weight.grad = element(*g, weight.index);
  if (kind == StageKind::ReduceGrads) weight.single_device_grad = single_device_gradient();
  if (weight.single_device_grad) weight.difference = weight.grad - *weight.single_device_grad;
  if (kind == StageKind::Step) weight.weight_after = element(tr.state().at(weight.param), weight.index);
  e.weight = weight;
}

std::optional<double> Iteration::Impl::single_device_gradient() const {
  try {
    return single_device_pass();
  } catch (const Error&) {
    return std::nullopt;  // the whole batch cannot go through the module alone; the card says so
  }
}

double Iteration::Impl::single_device_pass() const {
  Device& d0 = devs[0];
  const Model& model = tr.model();
  const int64_t peak = d0.memory().peak.load();
  double result = 0;
  {
    // The module's own parameters (only read) and copies of its buffers (BatchNorm updates them).
    Replica ref;
    ref.device = devs.shared(0);
    ref.caches.resize(ix(model.num_layers()));
    for (const auto& d : model.parameter_decls()) ref.params.set(d.name, tr.state().at(d.name));
    for (const auto& d : model.buffer_decls()) ref.buffers.set(d.name, tr.state().at(d.name).clone());
    Backend& be = d0.backend();
    Tensor x = input_dev0;
    for (int i = 0; i < model.num_layers(); ++i) {
      LayerRun run{be, ref, ref.caches[ix(i)], model.layer_prefix(i)};
      run.need_input_grad = i > 0;
      x = tr.model().layer(i).forward(run, x);
    }
    Tensor loss = Tensor::empty({}, x.dtype(), devs.shared(0));
    Tensor g = Tensor::empty(x.shape(), x.dtype(), devs.shared(0));
    be.cross_entropy(x, target_dev0, loss, g, 1.0);
    for (int i = model.num_layers() - 1; i >= 0; --i) {
      LayerRun run{be, ref, ref.caches[ix(i)], model.layer_prefix(i)};
      run.need_input_grad = i > 0;
      g = tr.model().layer(i).backward(run, g);
    }
    be.synchronize();
    result = element(ref.grads.at(weight.param, "the one-device gradients"), weight.index);
  }
  // The reference pass is not part of the iteration: its allocations (all freed now) leave the peak as it was.
  d0.memory().peak.store(peak);
  return result;
}

}  // namespace dpv
