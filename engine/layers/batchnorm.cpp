#include "engine/layers/batchnorm.h"

#include <cmath>
#include <sstream>

#include "engine/backend.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/index.h"
#include "engine/layers/simple_layers.h"

namespace dpv {

BatchNorm::BatchNorm(const LayerSpec& s)
    : two_d_(s.kind == LayerKind::BatchNorm2d), c_(s.num_features), eps_(s.eps), momentum_(s.momentum) {}

std::string BatchNorm::describe() const {
  std::ostringstream os;
  os << type() << "(" << c_ << ", eps=" << eps_ << ", momentum=" << momentum_
     << ", affine=True, track_running_stats=True)";
  return os.str();
}

std::vector<TensorDecl> BatchNorm::parameters(DType dtype) const {
  return {{"weight", {c_}, dtype}, {"bias", {c_}, dtype}};
}

std::vector<TensorDecl> BatchNorm::buffers(DType dtype) const {
  return {{"running_mean", {c_}, dtype}, {"running_var", {c_}, dtype}, {"num_batches_tracked", {}, DType::Int64}};
}

Shape BatchNorm::output_shape(const Shape& in) const {
  if (two_d_ && in.size() != 4)
    throw Error("expected 4D input (got " + std::to_string(in.size()) + "D input)", ErrorClass::ValueError);
  if (!two_d_ && in.size() != 2 && in.size() != 3)
    throw Error("expected 2D or 3D input (got " + std::to_string(in.size()) + "D input)", ErrorClass::ValueError);
  if (in[1] != c_)
    throw Error("running_mean should contain " + std::to_string(in[1]) + " elements not " + std::to_string(c_));
  return in;
}

void BatchNorm::initialise(TensorMap& state, const std::string& prefix, Rng&) const {
  state.at(prefix + "weight").copy_from(Tensor::full({c_}, state.at(prefix + "weight").dtype(), 1.0));
  state.at(prefix + "bias").copy_from(Tensor::full({c_}, state.at(prefix + "bias").dtype(), 0.0));
  state.at(prefix + "running_mean").copy_from(Tensor::full({c_}, state.at(prefix + "running_mean").dtype(), 0.0));
  state.at(prefix + "running_var").copy_from(Tensor::full({c_}, state.at(prefix + "running_var").dtype(), 1.0));
  state.at(prefix + "num_batches_tracked").copy_from(Tensor::full({}, DType::Int64, 0.0));
}

BatchNorm::Layout BatchNorm::layout(const Shape& x) const {
  int64_t S = 1;
  for (size_t i = 2; i < x.size(); ++i) S *= x[i];
  return {x[0], x[1], S};
}

void BatchNorm::local_stats(LayerRun& run, const Tensor& x, Tensor& mean, Tensor& var_b, bool single_check) const {
  const Tensor& w = run.param("weight");
  if (x.dtype() != w.dtype())
    throw Error(dtype_mismatch_message("BatchNorm", x.dtype(), w.dtype()));
  output_shape(x.shape());
  const Layout l = layout(x.shape());
  if (single_check && l.N * l.S == 1)
    throw Error("Expected more than 1 value per channel when training, got input size " + torch_size_str(x.shape()),
                ErrorClass::ValueError, ErrorReason::BatchNormSingleValue);
  mean = Tensor::empty({c_}, x.dtype(), run.replica.device);
  var_b = Tensor::empty({c_}, x.dtype(), run.replica.device);
  run.backend.bn_stats(x, mean, var_b, l.N, l.C, l.S);
}

Tensor BatchNorm::normalize(LayerRun& run, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                            const Tensor& var_b, double count, bool relu) const {
  const Layout l = layout(x.shape());
  Tensor y = Tensor::empty(x.shape(), x.dtype(), run.replica.device);
  if (relu) {
    run.backend.bn_normalize_relu(x, mean, invstd, run.param("weight"), run.param("bias"), y, l.N, l.C, l.S);
    run.cache.relu_output = y;
    run.cache.relu_fused = true;
  } else {
    run.backend.bn_normalize(x, mean, invstd, run.param("weight"), run.param("bias"), y, l.N, l.C, l.S);
    // A cache kept from a fused iteration must neither say so nor keep that iteration's ReLU output
    // alive (memory listings count what a layer keeps).
    run.cache.relu_fused = false;
    run.cache.relu_output = Tensor();
  }
  run.cache.input = x;
  run.cache.aux = mean;
  run.cache.aux2 = invstd;
  run.cache.var_b = var_b;
  run.cache.count = count;
  return y;
}

Tensor BatchNorm::output_before_relu(Backend& backend, const LayerCache& cache, const Tensor& gamma,
                                     const Tensor& beta) const {
  const Tensor& x = cache.input;
  const Layout l = layout(x.shape());
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device_ptr());
  backend.bn_normalize(x, cache.aux, cache.aux2, gamma, beta, y, l.N, l.C, l.S);
  return y;
}

void BatchNorm::count_batch(LayerRun& run) const {
  // num_batches_tracked += 1 on the device: the count never travels to the host.
  Tensor& nbt = run.buffer("num_batches_tracked");
  run.backend.add_inplace(nbt, Tensor::full({}, DType::Int64, 1.0, run.replica.device));
}

Tensor BatchNorm::forward(LayerRun& run, const Tensor& x) {
  if (!run.training) {
    // Eval: normalise with the running statistics.
    output_shape(x.shape());
    Tensor var = run.buffer("running_var").clone();
    Tensor invstd = Tensor::empty({c_}, x.dtype(), run.replica.device);
    run.backend.bn_invstd(var, eps_, invstd);
    return normalize(run, x, run.buffer("running_mean"), invstd, var, 0, run.fuse_next_relu);
  }
  Tensor mean, var_b;
  local_stats(run, x, mean, var_b, /*single_check=*/true);
  const Layout l = layout(x.shape());
  const double n = static_cast<double>(l.N * l.S);
  Tensor invstd = Tensor::empty({c_}, x.dtype(), run.replica.device);
  run.backend.bn_invstd(var_b, eps_, invstd);
  run.backend.bn_update_running(mean, var_b, n, momentum_, run.buffer("running_mean"), run.buffer("running_var"));
  count_batch(run);
  return normalize(run, x, mean, invstd, var_b, n, run.fuse_next_relu);
}

void BatchNorm::backward_reduce(LayerRun& run, const Tensor& dy, Tensor& sum_dy, Tensor& sum_dy_xmu) const {
  const Tensor& x = run.cache.input;
  const Layout l = layout(x.shape());
  sum_dy = Tensor::empty({c_}, x.dtype(), run.replica.device);
  sum_dy_xmu = Tensor::empty({c_}, x.dtype(), run.replica.device);
  run.backend.bn_backward_reduce(dy, x, run.cache.aux, sum_dy, sum_dy_xmu, l.N, l.C, l.S);
  accumulate_affine_grads(run, sum_dy, sum_dy_xmu);
}

void BatchNorm::accumulate_affine_grads(LayerRun& run, const Tensor& sum_dy, const Tensor& sum_dy_xmu) const {
  run.backend.addcmul_inplace(run.grad("weight"), sum_dy_xmu, run.cache.aux2);
  run.backend.add_inplace(run.grad("bias"), sum_dy);
}

Tensor BatchNorm::backward_elemt(LayerRun& run, const Tensor& dy, const Tensor& sum_dy, const Tensor& sum_dy_xmu,
                                 double count) const {
  const Tensor& x = run.cache.input;
  const Layout l = layout(x.shape());
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), run.replica.device);
  run.backend.bn_backward_elemt(dy, x, run.cache.aux, run.cache.aux2, run.param("weight"), sum_dy, sum_dy_xmu, count,
                                dx, l.N, l.C, l.S);
  return dx;
}

Tensor BatchNorm::backward(LayerRun& run, const Tensor& dy) {
  Tensor sum_dy, sum_dy_xmu;
  if (run.cache.relu_fused) {
    // dy is the gradient of the ReLU's output (the ReLU stage passed it through): the mask, the
    // reduce and the element-wise gradient run in the backend's fused op.
    const Tensor& x = run.cache.input;
    const Layout l = layout(x.shape());
    sum_dy = Tensor::empty({c_}, x.dtype(), run.replica.device);
    sum_dy_xmu = Tensor::empty({c_}, x.dtype(), run.replica.device);
    Tensor dx = Tensor::empty(x.shape(), x.dtype(), run.replica.device);
    run.backend.bn_relu_backward(dy, run.cache.relu_output, x, run.cache.aux, run.cache.aux2, run.param("weight"),
                                 sum_dy, sum_dy_xmu, run.cache.count, dx, l.N, l.C, l.S);
    accumulate_affine_grads(run, sum_dy, sum_dy_xmu);
    return dx;
  }
  backward_reduce(run, dy, sum_dy, sum_dy_xmu);
  return backward_elemt(run, dy, sum_dy, sum_dy_xmu, run.cache.count);
}

}  // namespace dpv
