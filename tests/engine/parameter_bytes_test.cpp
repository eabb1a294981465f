// parameter_bytes: the bytes of a model's parameters, all or one layer's (by name prefix), counted
// from their shapes and the model's dtype; buffers (BatchNorm's running statistics) not included.
#include <gtest/gtest.h>

#include "engine/model.h"
#include "engine/model_spec.h"

using namespace dpv;

namespace {

// Linear(4, 3), BatchNorm1d(3), ReLU, Linear(3, 2, bias=False).
ModelSpec small_spec(DType dtype) {
  LayerSpec first;
  first.in_features = 4;
  first.out_features = 3;
  LayerSpec bn;
  bn.kind = LayerKind::BatchNorm1d;
  bn.num_features = 3;
  LayerSpec relu;
  relu.kind = LayerKind::ReLU;
  LayerSpec last;
  last.in_features = 3;
  last.out_features = 2;
  last.bias = false;
  ModelSpec spec;
  spec.layers = {first, bn, relu, last};
  spec.dtype = dtype;
  return spec;
}

}  // namespace

TEST(ParameterBytes, AllParametersByDefaultOneLayersByItsPrefix) {
  const Model model(small_spec(DType::Float32));
  // 4*3 + 3 (Linear) + 3 + 3 (BatchNorm's weight and bias) + 3*2 (Linear without bias) = 27 floats.
  EXPECT_EQ(parameter_bytes(model), 27 * 4);
  EXPECT_EQ(parameter_bytes(model, "0."), 15 * 4);
  EXPECT_EQ(parameter_bytes(model, "1."), 6 * 4);
  EXPECT_EQ(parameter_bytes(model, "2."), 0);  // ReLU has none
  EXPECT_EQ(parameter_bytes(model, "3."), 6 * 4);
  EXPECT_EQ(parameter_bytes(model, "3.weight"), 6 * 4);
}

TEST(ParameterBytes, CountsTheModelsDtype) {
  EXPECT_EQ(parameter_bytes(Model(small_spec(DType::Float64))), 27 * 8);
}
