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
  check(in.size() == 4, "Expected 4D (batched) input to conv2d, but got input of size: " + shape_str(in));
  check(in[1] == cin_, "Given groups=1, weight of size " + shape_str({cout_, cin_, k_, k_}) +
                           ", expected input" + shape_str(in) + " to have " + std::to_string(cin_) +
                           " channels, but got " + std::to_string(in[1]) + " channels instead");
  // Padded sizes in checked arithmetic: a spec built in code (not parsed) is not bounded.
  const int64_t padded_h = size_or_throw(checked_add(in[2], checked_mul(pad_, 2)), "conv2d padded height");
  const int64_t padded_w = size_or_throw(checked_add(in[3], checked_mul(pad_, 2)), "conv2d padded width");
  check(padded_h >= k_ && padded_w >= k_,
        "Calculated padded input size per channel: (" + std::to_string(padded_h) + " x " + std::to_string(padded_w) +
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
  check(x.dtype() == w.dtype(), dtype_mismatch_message("Conv2d", x.dtype(), w.dtype()));
  const Shape os = output_shape(x.shape());
  const Backend::ConvGeometry g{x.dim(0), cin_, x.dim(2), x.dim(3), k_, k_, stride_, pad_, os[2], os[3]};
  const int64_t rows = cin_ * k_ * k_, L = g.OH * g.OW;
  // One GEMM for the whole batch: columns laid out [C*k*k, N*L] so the product is wide enough for BLAS.
  Tensor col = Tensor::empty({g.N, rows, L}, x.dtype(), run.replica.device);  // [N, C*k*k, L]
  run.backend.im2col(x, col, g);
  Tensor col_t = Tensor::empty({rows, g.N, L}, x.dtype(), run.replica.device);  // [C*k*k, N, L]
  run.backend.permute_nos(col, col_t, g.N, rows, L);
  Tensor y_t = Tensor::empty({cout_, g.N, L}, x.dtype(), run.replica.device);  // [O, N, L]
  run.backend.gemm(false, false, cout_, g.N * L, rows, 1.0, w, col_t, 0.0, y_t);
  Tensor y = Tensor::empty(os, x.dtype(), run.replica.device);  // [N, O, OH, OW]
  run.backend.permute_nos(y_t, y, cout_, g.N, L);
  if (bias_) run.backend.add_channel_bias(y, run.param("bias"), g.N, cout_, L);
  run.cache.input = x;
  run.cache.aux = col_t;
  return y;
}

Tensor Conv2d::backward(LayerRun& run, const Tensor& dy) {
  const Tensor& x = run.cache.input;
  const Tensor& col_t = run.cache.aux;  // [C*k*k, N, L]
  const Shape os = dy.shape();
  const Backend::ConvGeometry g{x.dim(0), cin_, x.dim(2), x.dim(3), k_, k_, stride_, pad_, os[2], os[3]};
  const int64_t rows = cin_ * k_ * k_, L = g.OH * g.OW;
  Tensor& w = run.param("weight");
  Tensor dy_t = Tensor::empty({cout_, g.N, L}, dy.dtype(), run.replica.device);  // [O, N, L]
  run.backend.permute_nos(dy, dy_t, g.N, cout_, L);
  // dW[O, C*k*k] += dy_t[O, N*L] @ col_t[C*k*k, N*L]^T
  bool fresh = false;
  Tensor& dw = run.grad("weight", fresh);
  run.backend.gemm(false, true, cout_, rows, g.N * L, 1.0, dy_t, col_t, fresh ? 0.0 : 1.0, dw);
  if (bias_) {
    Tensor& db = run.grad("bias", fresh);
    run.backend.sum_channels(dy, db, g.N, cout_, L, !fresh);
  }
  if (!run.need_input_grad) return {};
  // dcol_t[C*k*k, N*L] = W^T @ dy_t, then back to [N, C*k*k, L] and scattered into the image.
  Tensor dcol_t = Tensor::empty({rows, g.N, L}, dy.dtype(), run.replica.device);
  run.backend.gemm(true, false, rows, g.N * L, cout_, 1.0, w, dy_t, 0.0, dcol_t);
  Tensor dcol = Tensor::empty({g.N, rows, L}, dy.dtype(), run.replica.device);
  run.backend.permute_nos(dcol_t, dcol, rows, g.N, L);
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), run.replica.device);
  run.backend.col2im(dcol, dx, g);
  return dx;
}

}  // namespace dpv
