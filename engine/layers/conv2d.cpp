#include <cmath>

#include "engine/backend.h"
#include "engine/checked_math.h"
#include "engine/datasets.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/index.h"
#include "engine/layers/simple_layers.h"

namespace dpv {

Conv2d::Conv2d(const LayerSpec& s)
    : cin_(s.in_channels), cout_(s.out_channels), k_(s.kernel_size), stride_(s.stride), pad_(s.padding), bias_(s.bias) {}

std::string Conv2d::describe() const {
  std::string d = "Conv2d(" + std::to_string(cin_) + ", " + std::to_string(cout_) + ", kernel_size=(" +
                  std::to_string(k_) + ", " + std::to_string(k_) + "), stride=(" + std::to_string(stride_) + ", " +
                  std::to_string(stride_) + ")";
  if (pad_) d += ", padding=(" + std::to_string(pad_) + ", " + std::to_string(pad_) + ")";
  if (!bias_) d += ", bias=False";
  return d + ")";
}

std::vector<TensorDecl> Conv2d::parameters(DType dtype) const {
  std::vector<TensorDecl> p{{"weight", {cout_, cin_, k_, k_}, dtype}};
  if (bias_) p.push_back({"bias", {cout_}, dtype});
  return p;
}

Shape Conv2d::output_shape(const Shape& in) const {
  if (in.size() != 4)
    throw Error("Expected 4D (batched) input to conv2d, but got input of size: " + shape_str(in));
  if (in[1] != cin_)
    throw Error("Given groups=1, weight of size " + shape_str({cout_, cin_, k_, k_}) +
                ", expected input" + shape_str(in) + " to have " + std::to_string(cin_) +
                " channels, but got " + std::to_string(in[1]) + " channels instead");
  // Padded sizes in checked arithmetic: a spec built in code (not parsed) is not bounded.
  const int64_t padded_h = size_or_throw(checked_add(in[2], checked_mul(pad_, 2)), "conv2d padded height");
  const int64_t padded_w = size_or_throw(checked_add(in[3], checked_mul(pad_, 2)), "conv2d padded width");
  if (padded_h < k_ || padded_w < k_)
    throw Error("Calculated padded input size per channel: (" + std::to_string(padded_h) + " x " +
                std::to_string(padded_w) +
                "). Kernel size: (" + std::to_string(k_) + " x " + std::to_string(k_) +
                "). Kernel size can't be greater than actual input size");
  const int64_t oh = (padded_h - k_) / stride_ + 1, ow = (padded_w - k_) / stride_ + 1;
  return {in[0], cout_, oh, ow};
}

void Conv2d::initialise(TensorMap& state, const std::string& prefix, Rng& rng) const {
  const double fan_in = static_cast<double>(cin_ * k_ * k_);
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(fan_in) : 0.0;
  for (const char* name : {"weight", "bias"}) {
    if (std::string(name) == "bias" && !bias_) continue;
    Tensor& t = state.at(prefix + name);
    std::vector<double> v(ix(t.numel()));
    for (auto& x : v) x = rng.uniform(-bound, bound);
    t.copy_from(Tensor::from_doubles(t.shape(), t.dtype(), v));
  }
}

Tensor Conv2d::forward(LayerRun& run, const Tensor& x) {
  Tensor& w = run.param("weight");  // [O, C, k, k]
  if (x.dtype() != w.dtype())
    throw Error(dtype_mismatch_message("Conv2d", x.dtype(), w.dtype()));
  const Shape os = output_shape(x.shape());
  const Backend::ConvGeometry g{x.dim(0), cin_, x.dim(2), x.dim(3), k_, k_, stride_, pad_, os[2], os[3]};
  Tensor y = Tensor::empty(os, x.dtype(), run.replica.device);  // [N, O, OH, OW]
  run.cache.aux = Tensor();
  run.backend.conv2d_forward(x, w, bias_ ? &run.param("bias") : nullptr, y, run.cache.aux, g);
  run.cache.input = x;
  return y;
}

Tensor Conv2d::backward(LayerRun& run, const Tensor& dy) {
  const Tensor& x = run.cache.input;
  const Shape os = dy.shape();
  const Backend::ConvGeometry g{x.dim(0), cin_, x.dim(2), x.dim(3), k_, k_, stride_, pad_, os[2], os[3]};
  bool fresh = false;
  Tensor& dw = run.grad("weight", fresh);
  if (bias_) {
    // Not from oneDNN's weight pass (which can sum it too): its AVX2 kernel for the first
    // convolution (3 -> 8 channels) took 0.09 ms more with the bias gradient, sum_channels 0.04.
    bool bias_fresh = false;
    Tensor& db = run.grad("bias", bias_fresh);
    run.backend.sum_channels(dy, db, g.N, cout_, g.OH * g.OW, !bias_fresh);
  }
  Tensor dx;
  if (run.need_input_grad) dx = Tensor::empty(x.shape(), x.dtype(), run.replica.device);
  run.backend.conv2d_backward(x, run.cache.aux, run.param("weight"), dy, dw, !fresh,
                              run.need_input_grad ? &dx : nullptr, g);
  return dx;
}

}  // namespace dpv
