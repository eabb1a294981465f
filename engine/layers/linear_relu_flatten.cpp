#include <cmath>

#include "engine/backend.h"
#include "engine/datasets.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/index.h"
#include "engine/layers/simple_layers.h"

namespace dpv {

std::string dtype_mismatch_message(const std::string& layer_type, DType input, DType weight) {
  const std::string in = dtype_torch_name(input), w = dtype_torch_name(weight);
  if (layer_type == "Linear") return "mat1 and mat2 must have the same dtype, but got " + in + " and " + w;
  if (layer_type == "Conv2d") {
    auto lower = [](std::string s) {
      for (auto& ch : s) ch = static_cast<char>(std::tolower(ch));
      return s;
    };
    return "Input type (" + lower(in) + ") and bias type (" + lower(w) + ") should be the same";
  }
  return "expected scalar type " + w + " but found " + in;
}

namespace {
void uniform_fill(Tensor& t, double bound, Rng& rng) {
  std::vector<double> v(ix(t.numel()));
  for (auto& x : v) x = rng.uniform(-bound, bound);
  t.copy_from(Tensor::from_doubles(t.shape(), t.dtype(), v));
}
}  // namespace

Linear::Linear(const LayerSpec& s) : in_(s.in_features), out_(s.out_features), bias_(s.bias) {}

std::string Linear::describe() const {
  return "Linear(in_features=" + std::to_string(in_) + ", out_features=" + std::to_string(out_) +
         ", bias=" + (bias_ ? "True" : "False") + ")";
}

std::vector<TensorDecl> Linear::parameters(DType dtype) const {
  std::vector<TensorDecl> p{{"weight", {out_, in_}, dtype}};
  if (bias_) p.push_back({"bias", {out_}, dtype});
  return p;
}

Shape Linear::output_shape(const Shape& in) const {
  if (in.size() != 2)
    throw Error("Linear expects a 2-D input [N, " + std::to_string(in_) + "] here, got " + shape_str(in) +
                " (add a flatten layer before it)");
  if (in[1] != in_)
    throw Error("mat1 and mat2 shapes cannot be multiplied (" + std::to_string(in[0]) + "x" +
                std::to_string(in[1]) + " and " + std::to_string(in_) + "x" + std::to_string(out_) + ")");
  return {in[0], out_};
}

void Linear::initialise(TensorMap& state, const std::string& prefix, Rng& rng) const {
  // kaiming_uniform_(a=sqrt(5)) gives bound 1/sqrt(fan_in); the bias uses the same bound.
  const double bound = in_ > 0 ? 1.0 / std::sqrt(static_cast<double>(in_)) : 0.0;
  uniform_fill(state.at(prefix + "weight"), bound, rng);
  if (bias_) uniform_fill(state.at(prefix + "bias"), bound, rng);
}

Tensor Linear::forward(LayerRun& run, const Tensor& x) {
  Tensor& w = run.param("weight");  // [out, in]
  if (x.dtype() != w.dtype())
    throw Error(dtype_mismatch_message("Linear", x.dtype(), w.dtype()));
  const Shape out_shape = output_shape(x.shape());
  const int64_t N = x.dim(0);
  Tensor y = Tensor::empty(out_shape, x.dtype(), run.replica.device);  // [N, out]
  run.backend.gemm(false, true, N, out_, in_, 1.0, x, w, 0.0, y);
  if (bias_) run.backend.add_channel_bias(y, run.param("bias"), N, out_, 1);
  run.cache.input = x;
  return y;
}

Tensor Linear::backward(LayerRun& run, const Tensor& dy) {
  const Tensor& x = run.cache.input;  // [N, in]
  const int64_t N = x.dim(0);
  Tensor& w = run.param("weight");
  // dW[out, in] += dy^T @ x; db[out] += sum over rows of dy; dx[N, in] = dy @ W
  bool fresh = false;
  Tensor& dw = run.grad("weight", fresh);
  run.backend.gemm(true, false, out_, in_, N, 1.0, dy, x, fresh ? 0.0 : 1.0, dw);
  if (bias_) {
    Tensor& db = run.grad("bias", fresh);
    run.backend.sum_channels(dy, db, N, out_, 1, !fresh);
  }
  if (!run.need_input_grad) return {};
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), run.replica.device);
  run.backend.gemm(false, false, N, in_, out_, 1.0, dy, w, 0.0, dx);
  return dx;
}

Tensor ReLU::forward(LayerRun& run, const Tensor& x) {
  if (run.relu_done_before) {  // the BatchNorm before wrote relu(BatchNorm(x)) already
    run.cache.output = x;
    run.cache.relu_fused = true;
    return x;
  }
  Tensor y = Tensor::empty(x.shape(), x.dtype(), run.replica.device);
  run.backend.relu_forward(x, y);
  run.cache.output = y;
  run.cache.relu_fused = false;  // a cache kept from a fused iteration must not say so
  return y;
}

Tensor ReLU::backward(LayerRun& run, const Tensor& dy) {
  if (run.cache.relu_fused) return dy;  // the BatchNorm before masks the gradient in its own pass
  Tensor dx = Tensor::empty(dy.shape(), dy.dtype(), run.replica.device);
  run.backend.relu_backward(run.cache.output, dy, dx);
  return dx;
}

Shape Flatten::output_shape(const Shape& in) const {
  if (in.empty())
    throw Error("Flatten expects at least a 1-dimensional input, got " + shape_str(in));
  int64_t rest = 1;
  for (size_t i = 1; i < in.size(); ++i) rest *= in[i];
  return {in[0], rest};
}

Tensor Flatten::forward(LayerRun& run, const Tensor& x) {
  run.cache.input = x;
  return x.reshape(output_shape(x.shape()));
}

Tensor Flatten::backward(LayerRun& run, const Tensor& dy) { return dy.reshape(run.cache.input.shape()); }

}  // namespace dpv
