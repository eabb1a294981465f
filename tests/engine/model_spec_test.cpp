// Model spec JSON: PyTorch argument names and defaults, precise errors, round trips, presets.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "tests/support/errors.h"
#include "engine/model.h"
#include "engine/model_spec.h"

using dpv::LayerSpec;
using dpv::ModelSpec;

namespace {

using dpv::testing::error_of;

std::string spec_error(const std::string& text) {
  return error_of([&] { dpv::parse_model_spec(text, "m.json"); });
}

void expect_same(const ModelSpec& a, const ModelSpec& b) {
  ASSERT_EQ(a.layers.size(), b.layers.size());
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.dtype, b.dtype);
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const LayerSpec &x = a.layers[i], &y = b.layers[i];
    EXPECT_EQ(x.kind, y.kind) << i;
    EXPECT_EQ(x.in_features, y.in_features) << i;
    EXPECT_EQ(x.out_features, y.out_features) << i;
    EXPECT_EQ(x.bias, y.bias) << i;
    EXPECT_EQ(x.in_channels, y.in_channels) << i;
    EXPECT_EQ(x.out_channels, y.out_channels) << i;
    EXPECT_EQ(x.kernel_size, y.kernel_size) << i;
    EXPECT_EQ(x.stride, y.stride) << i;
    EXPECT_EQ(x.padding, y.padding) << i;
    EXPECT_EQ(x.num_features, y.num_features) << i;
    EXPECT_EQ(x.eps, y.eps) << i;
    EXPECT_EQ(x.momentum, y.momentum) << i;
  }
}

}  // namespace

TEST(ModelSpecTest, ParsesEveryLayerTypeWithPyTorchDefaults) {
  const ModelSpec spec = dpv::parse_model_spec(R"({
    "layers": [
      {"type": "conv2d", "in_channels": 3, "out_channels": 8, "kernel_size": 3},
      {"type": "batchnorm2d", "num_features": 8},
      {"type": "relu"},
      {"type": "flatten"},
      {"type": "linear", "in_features": 512, "out_features": 10, "bias": false},
      {"type": "batchnorm1d", "num_features": 10, "eps": 0.001, "momentum": 0.5}
    ]})");
  ASSERT_EQ(spec.layers.size(), 6u);
  EXPECT_EQ(spec.loss, "cross_entropy");
  EXPECT_EQ(spec.dtype, dpv::DType::Float32);
  const LayerSpec& conv = spec.layers[0];
  EXPECT_STREQ(dpv::layer_kind_name(conv.kind), "conv2d");
  EXPECT_EQ(conv.out_channels, 8);
  EXPECT_EQ(conv.stride, 1);
  EXPECT_EQ(conv.padding, 0);
  EXPECT_TRUE(conv.bias);
  EXPECT_EQ(spec.layers[1].eps, 1e-5);
  EXPECT_EQ(spec.layers[1].momentum, 0.1);
  EXPECT_STREQ(dpv::layer_kind_name(spec.layers[3].kind), "flatten");
  EXPECT_FALSE(spec.layers[4].bias);
  EXPECT_EQ(spec.layers[4].in_features, 512);
  EXPECT_EQ(spec.layers[5].eps, 0.001);
  EXPECT_EQ(spec.layers[5].momentum, 0.5);
}

TEST(ModelSpecTest, AcceptsPyTorchClassNamesAndFloat64) {
  const ModelSpec spec = dpv::parse_model_spec(
      R"({"layers": [{"type": "Linear", "in_features": 2, "out_features": 3}, {"type": "BatchNorm1d", "num_features": 3}],
          "loss": "cross_entropy", "dtype": "float64"})");
  EXPECT_STREQ(dpv::layer_kind_name(spec.layers[0].kind), "linear");
  EXPECT_STREQ(dpv::layer_kind_name(spec.layers[1].kind), "batchnorm1d");
  EXPECT_EQ(spec.dtype, dpv::DType::Float64);
}

TEST(ModelSpecTest, MalformedJsonNamesTheSourceAndPosition) {
  const std::string msg = spec_error(R"({"layers": [{"type": "linear", "in_features": 2)");
  EXPECT_NE(msg.find("m.json: not valid JSON (at byte"), std::string::npos) << msg;
  EXPECT_NE(spec_error("   ").find("m.json: the model spec is empty"), std::string::npos);
  EXPECT_NE(spec_error("[1, 2]").find("expected a JSON object"), std::string::npos);
  // A number too large for a double is a JSON error too, not a crash.
  EXPECT_NE(spec_error(R"({"layers": [{"type": "linear", "in_features": 1e999}]})").find("m.json: not valid JSON"),
            std::string::npos);
}

TEST(ModelSpecTest, StructuralErrors) {
  EXPECT_NE(spec_error(R"({"loss": "cross_entropy"})").find("m.json: missing \"layers\""), std::string::npos);
  EXPECT_NE(spec_error(R"({"layers": {}})").find("\"layers\" must be a list"), std::string::npos);
  EXPECT_NE(spec_error(R"({"layers": []})").find("at least one layer"), std::string::npos);
  EXPECT_NE(spec_error(R"({"layers": [{"type": "relu"}], "lyers": 1})").find("unknown key 'lyers'"),
            std::string::npos);
  EXPECT_NE(spec_error(R"({"layers": [3]})").find("m.json: layer 0: expected an object"), std::string::npos);
  EXPECT_NE(spec_error(R"({"layers": [{"in_features": 3}]})").find("layer 0: missing 'type'"), std::string::npos);
}

TEST(ModelSpecTest, UnknownLayerTypeListsTheKnownOnes) {
  const std::string msg = spec_error(R"({"layers": [{"type": "relu"}, {"type": "dropout", "p": 0.5}]})");
  EXPECT_NE(msg.find("m.json: layer 1: unknown layer type 'dropout'"), std::string::npos) << msg;
  for (const char* t : {"linear", "relu", "flatten", "conv2d", "batchnorm1d", "batchnorm2d"})
    EXPECT_NE(msg.find(t), std::string::npos) << t;
}

TEST(ModelSpecTest, MissingArgumentIsNamedWithTheLayer) {
  const std::string msg = spec_error(R"({"layers": [{"type": "relu"}, {"type": "flatten"},
                                                   {"type": "linear", "in_features": 4}]})");
  EXPECT_EQ(msg, "m.json: layer 2 (linear): missing 'out_features'");
  EXPECT_NE(spec_error(R"({"layers": [{"type": "conv2d", "in_channels": 3, "out_channels": 4}]})")
                .find("layer 0 (conv2d): missing 'kernel_size'"),
            std::string::npos);
  EXPECT_NE(spec_error(R"({"layers": [{"type": "batchnorm2d"}]})").find("layer 0 (batchnorm2d): missing 'num_features'"),
            std::string::npos);
}

TEST(ModelSpecTest, WrongTypesAndValuesAreRejected) {
  auto linear_with = [](const std::string& extra) {
    return spec_error(R"({"layers": [{"type": "linear", "in_features": 4, )" + extra + "}]}");
  };
  EXPECT_NE(linear_with(R"("out_features": "2")").find("'out_features' must be an integer, got \"2\""),
            std::string::npos);
  EXPECT_NE(linear_with(R"("out_features": 2.5)").find("'out_features' must be an integer"), std::string::npos);
  EXPECT_NE(linear_with(R"("out_features": 0)").find("'out_features' must be positive, got 0"), std::string::npos);
  EXPECT_NE(linear_with(R"("out_features": -3)").find("must be positive"), std::string::npos);
  EXPECT_NE(linear_with(R"("out_features": 2, "bias": 1)").find("'bias' must be true or false"), std::string::npos);
  EXPECT_NE(spec_error(R"({"layers": [{"type": 5}]})").find("'type' must be a string"), std::string::npos);
  EXPECT_NE(spec_error(R"({"layers": [{"type": "conv2d", "in_channels": 3, "out_channels": 4, "kernel_size": [3, 3]}]})")
                .find("'kernel_size' must be an integer"),
            std::string::npos);
  EXPECT_NE(spec_error(R"({"layers": [{"type": "conv2d", "in_channels": 3, "out_channels": 4, "kernel_size": 3, "padding": -1}]})")
                .find("'padding' must be at least 0"),
            std::string::npos);
  EXPECT_NE(spec_error(R"({"layers": [{"type": "batchnorm1d", "num_features": 4, "momentum": 2}]})")
                .find("'momentum' must be between 0 and 1"),
            std::string::npos);
  EXPECT_NE(spec_error(R"({"layers": [{"type": "batchnorm1d", "num_features": 4, "eps": 0}]})")
                .find("'eps' must be positive"),
            std::string::npos);
}

TEST(ModelSpecTest, EverySizeIsBoundedAtParseTimeNamingTheField) {
  // Padding 2^63-1 once wrapped around in the shape arithmetic and trained a wrong model; 2^31 gave
  // a message with a wrapped size.
  auto conv_with = [](const std::string& extra) {
    return spec_error(R"({"layers": [{"type": "conv2d", "in_channels": 3, "out_channels": 4, "kernel_size": 3, )" + extra +
                      "}]}");
  };
  std::string msg = conv_with(R"("padding": 9223372036854775807)");
  EXPECT_NE(msg.find("m.json: layer 0 (conv2d): 'padding' = 9223372036854775807 is too large (at most 4096)"),
            std::string::npos) << msg;
  msg = conv_with(R"("padding": 2147483648)");
  EXPECT_NE(msg.find("'padding' = 2147483648 is too large"), std::string::npos) << msg;
  msg = conv_with(R"("stride": 18446744073709551615)");
  EXPECT_NE(msg.find("'stride' = 18446744073709551615 is too large"), std::string::npos) << msg;
  msg = spec_error(R"({"layers": [{"type": "conv2d", "in_channels": 3, "out_channels": 4, "kernel_size": 5000}]})");
  EXPECT_NE(msg.find("'kernel_size' = 5000 is too large"), std::string::npos) << msg;
  msg = spec_error(R"({"layers": [{"type": "linear", "in_features": 4, "out_features": 16777217}]})");
  EXPECT_NE(msg.find("'out_features' = 16777217 is too large (at most 16777216)"), std::string::npos) << msg;
  msg = spec_error(R"({"layers": [{"type": "batchnorm1d", "num_features": 1099511627776}]})");
  EXPECT_NE(msg.find("'num_features' = 1099511627776 is too large"), std::string::npos) << msg;
  // Each size within its bound, but the weight as a whole too large.
  msg = spec_error(R"({"layers": [{"type": "linear", "in_features": 16777216, "out_features": 16777216}]})");
  EXPECT_NE(msg.find("layer 0 (linear): the weight [16777216, 16777216] would hold 281474976710656 elements"),
            std::string::npos) << msg;
  msg = conv_with(R"("kernel_size": 4096, "in_channels": 16777216, "out_channels": 16777216)");
  EXPECT_NE(msg.find("would hold more than 2^63 elements"), std::string::npos) << msg;
  // The bounds themselves are accepted.
  EXPECT_EQ(conv_with(R"("padding": 4096, "stride": 4096)"), "<no error>");
}

TEST(ModelSpecTest, ConvShapesUseCheckedArithmetic) {
  // A spec built in code is not bounded by the parser: the shape computation says it overflows.
  LayerSpec conv;
  conv.kind = dpv::LayerKind::Conv2d;
  conv.in_channels = 1;
  conv.out_channels = 1;
  conv.kernel_size = 1;
  conv.padding = INT64_MAX / 2;
  ModelSpec spec;
  spec.layers = {conv};
  const std::string msg = error_of([&] { (void)dpv::Model(spec).activation_shapes({1, 1, 8, 8}); });
  EXPECT_NE(msg.find("conv2d padded height is too large"), std::string::npos) << msg;
}

TEST(ModelSpecTest, UnknownKeysInALayerAreRejected) {
  const std::string msg = spec_error(R"({"layers": [{"type": "linear", "in_features": 4, "out_feature": 2, "out_features": 2}]})");
  EXPECT_NE(msg.find("layer 0 (linear): unknown key 'out_feature'"), std::string::npos) << msg;
  EXPECT_NE(spec_error(R"({"layers": [{"type": "relu", "inplace": true}]})").find("unknown key 'inplace'"),
            std::string::npos);
}

TEST(ModelSpecTest, LossAndDtypeAreChecked) {
  EXPECT_NE(spec_error(R"({"layers": [{"type": "relu"}], "loss": "mse"})").find("unknown loss 'mse'"),
            std::string::npos);
  EXPECT_NE(spec_error(R"({"layers": [{"type": "relu"}], "dtype": "int64"})").find("float32 or float64"),
            std::string::npos);
  EXPECT_NE(spec_error(R"({"layers": [{"type": "relu"}], "dtype": 32})").find("\"dtype\" must be a string"),
            std::string::npos);
}

TEST(ModelSpecTest, EveryPresetRoundTripsThroughJson) {
  for (const std::string& name : dpv::preset_names()) {
    SCOPED_TRACE(name);
    const ModelSpec spec = dpv::preset_model(name);
    const std::string text = dpv::model_spec_to_json(spec);
    expect_same(spec, dpv::parse_model_spec(text, name));
  }
  ModelSpec custom = dpv::preset_model("cnn");
  custom.dtype = dpv::DType::Float64;
  custom.layers[0].bias = false;
  custom.layers[1].eps = 1e-3;
  custom.layers[1].momentum = 0.25;
  expect_same(custom, dpv::parse_model_spec(dpv::model_spec_to_json(custom)));
}

TEST(ModelSpecTest, PresetsHaveTheDocumentedShapes) {
  EXPECT_EQ(dpv::preset_names(),
            (std::vector<std::string>{"simple", "mlp-bn", "mnist-mlp", "mlp-large", "cnn", "gpu-mlp"}));
  const ModelSpec simple = dpv::preset_model("simple");
  ASSERT_EQ(simple.layers.size(), 1u);
  EXPECT_EQ(simple.layers[0].in_features, 10);
  EXPECT_EQ(simple.layers[0].out_features, 2);

  auto types = [](const ModelSpec& s) {
    std::vector<std::string> t;
    for (const auto& l : s.layers) t.push_back(dpv::layer_kind_name(l.kind));
    return t;
  };
  const std::vector<std::string> mlp{"linear", "batchnorm1d", "relu", "linear", "batchnorm1d", "relu", "linear"};
  const ModelSpec bn = dpv::preset_model("mlp-bn");
  EXPECT_EQ(types(bn), mlp);
  EXPECT_EQ(bn.layers[0].in_features, 2);
  EXPECT_EQ(bn.layers[1].num_features, 32);
  EXPECT_EQ(bn.layers[6].out_features, 3);
  EXPECT_EQ(dpv::preset_model("mnist-mlp").layers[0].out_features, 256);
  EXPECT_EQ(dpv::preset_model("mlp-large").layers[3].in_features, 1024);
  const ModelSpec gpu = dpv::preset_model("gpu-mlp");
  EXPECT_EQ(gpu.layers[0].in_features, 1024);
  EXPECT_EQ(gpu.layers[6].out_features, 1000);

  const ModelSpec cnn = dpv::preset_model("cnn");
  EXPECT_EQ(types(cnn), (std::vector<std::string>{"conv2d", "batchnorm2d", "relu", "conv2d", "batchnorm2d", "relu",
                                                  "flatten", "linear"}));
  EXPECT_EQ(cnn.layers[3].stride, 2);
  EXPECT_EQ(cnn.layers[3].padding, 1);
  EXPECT_EQ(cnn.layers[7].in_features, 16 * 16 * 16);

  // Consecutive linear layers agree on their sizes in every MLP preset.
  for (const std::string& name : dpv::preset_names()) {
    int64_t width = -1;
    for (const auto& l : dpv::preset_model(name).layers) {
      if (l.kind == dpv::LayerKind::Linear) {
        if (width > 0) {
          EXPECT_EQ(l.in_features, width) << name;
        }
        width = l.out_features;
      } else if (l.kind == dpv::LayerKind::BatchNorm1d) {
        EXPECT_EQ(l.num_features, width) << name;
      } else if (l.kind == dpv::LayerKind::Flatten) {
        width = -1;
      }
    }
  }
}

TEST(ModelSpecTest, UnknownPresetListsTheNames) {
  const std::string msg = error_of([] { dpv::preset_model("resnet"); });
  EXPECT_NE(msg.find("'resnet'"), std::string::npos) << msg;
  for (const std::string& name : dpv::preset_names()) EXPECT_NE(msg.find(name), std::string::npos) << name;
}

TEST(ModelSpecTest, LoadNamesTheFile) {
  std::random_device rd;
  const auto path = std::filesystem::temp_directory_path() / ("dpv-spec-" + std::to_string(rd()) + ".json");
  dpv::write_file_atomic(path.string(), R"({"layers": [{"type": "linear", "in_features": 10}]})");
  const std::string msg = error_of([&] { dpv::load_model_spec(path.string()); });
  std::filesystem::remove(path);
  EXPECT_EQ(msg, path.string() + ": layer 0 (linear): missing 'out_features'");
  EXPECT_NE(error_of([] { dpv::load_model_spec("/nonexistent/spec.json"); }).find("/nonexistent/spec.json"),
            std::string::npos);
}
