#pragma once
// Linear, ReLU, Flatten and Conv2d with explicit forward and backward.
#include "engine/layer.h"

namespace dpv {

class Linear final : public Layer {
 public:
  explicit Linear(const LayerSpec& spec);
  LayerKind kind() const override { return LayerKind::Linear; }
  std::string type() const override { return "Linear"; }
  std::string describe() const override;
  std::vector<TensorDecl> parameters(DType dtype) const override;
  Shape output_shape(const Shape& input) const override;
  void initialise(TensorMap& state, const std::string& prefix, Rng& rng) const override;
  Tensor forward(LayerRun& run, const Tensor& x) override;    // x [N, in] -> y [N, out]
  Tensor backward(LayerRun& run, const Tensor& dy) override;  // dy [N, out] -> dx [N, in]

 private:
  int64_t in_, out_;
  bool bias_;
};

class ReLU final : public Layer {
 public:
  LayerKind kind() const override { return LayerKind::ReLU; }
  std::string type() const override { return "ReLU"; }
  std::string describe() const override { return "ReLU()"; }
  bool is_relu() const override { return true; }
  Shape output_shape(const Shape& input) const override { return input; }
  Tensor forward(LayerRun& run, const Tensor& x) override;
  Tensor backward(LayerRun& run, const Tensor& dy) override;
};

class Flatten final : public Layer {
 public:
  LayerKind kind() const override { return LayerKind::Flatten; }
  std::string type() const override { return "Flatten"; }
  std::string describe() const override { return "Flatten(start_dim=1, end_dim=-1)"; }
  Shape output_shape(const Shape& input) const override;
  Tensor forward(LayerRun& run, const Tensor& x) override;    // [N, ...] -> [N, prod(...)], a view
  Tensor backward(LayerRun& run, const Tensor& dy) override;
};

class Conv2d final : public Layer {
 public:
  explicit Conv2d(const LayerSpec& spec);
  LayerKind kind() const override { return LayerKind::Conv2d; }
  std::string type() const override { return "Conv2d"; }
  std::string describe() const override;
  std::vector<TensorDecl> parameters(DType dtype) const override;
  Shape output_shape(const Shape& input) const override;
  void initialise(TensorMap& state, const std::string& prefix, Rng& rng) const override;
  Tensor forward(LayerRun& run, const Tensor& x) override;    // x [N, C, H, W] -> y [N, O, OH, OW]
  Tensor backward(LayerRun& run, const Tensor& dy) override;

 private:
  int64_t cin_, cout_, k_, stride_, pad_;
  bool bias_;
};

// The PyTorch dtype-mismatch message of a layer's first op, e.g. Linear's addmm:
// "mat1 and mat2 must have the same dtype, but got Double and Float".
std::string dtype_mismatch_message(const std::string& layer_type, DType input, DType weight);

}  // namespace dpv
