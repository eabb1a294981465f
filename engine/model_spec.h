#pragma once
// The model spec file (JSON): {"layers": [...], "loss": "cross_entropy", "dtype": "float32"}.
// Layer fields use PyTorch's constructor argument names and defaults.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/dtype.h"

namespace dpv {

// Bounds on the sizes a spec may ask for, checked at parse time so every shape computed from them
// fits in 64 bits: widths (features, channels) up to 2^24, kernel size, stride and padding up to
// 4096, and at most 2^36 elements (256 GiB as float32) in one layer's weight.
inline constexpr int64_t kMaxModelWidth = int64_t{1} << 24;
inline constexpr int64_t kMaxKernelGeometry = 4096;
inline constexpr int64_t kMaxLayerWeights = int64_t{1} << 36;

// The layers a model can hold. A switch over LayerKind has no default, so a new kind that some code
// does not handle is a compile warning there (-Wswitch), not a silent fall-through.
enum class LayerKind { Linear, ReLU, Flatten, Conv2d, BatchNorm1d, BatchNorm2d };
// The name in the model file's "type" field: "linear", "relu", "flatten", "conv2d", "batchnorm1d",
// "batchnorm2d". The file format is the only place layer kinds are strings.
const char* layer_kind_name(LayerKind kind);
inline bool is_batchnorm(LayerKind kind) { return kind == LayerKind::BatchNorm1d || kind == LayerKind::BatchNorm2d; }

struct LayerSpec {
  LayerKind kind = LayerKind::Linear;
  // linear
  int64_t in_features = 0, out_features = 0;
  bool bias = true;  // linear and conv2d
  // conv2d
  int64_t in_channels = 0, out_channels = 0, kernel_size = 0, stride = 1, padding = 0;
  // batchnorm
  int64_t num_features = 0;
  double eps = 1e-5, momentum = 0.1;
};

struct ModelSpec {
  std::vector<LayerSpec> layers;
  std::string loss = "cross_entropy";
  DType dtype = DType::Float32;
};

// Parses a spec; throws dpv::Error naming `source` (a file name) and what is wrong.
ModelSpec parse_model_spec(const std::string& json_text, const std::string& source = "model spec");
ModelSpec load_model_spec(const std::string& path);
std::string model_spec_to_json(const ModelSpec& spec);

// Built-in presets the CLI and the app offer: "simple" (the seed's Linear(10, 2)),
// "mlp-bn" (2-32-BN-ReLU-32-BN-ReLU-3 for the 3-class spiral), "mnist-mlp" (784-256-BN-256-BN-10),
// "mlp-large" (784-1024-BN-1024-BN-10), "cnn" (3x32x32 conv-BN-ReLU, conv-BN-ReLU, flatten, linear),
// "gpu-mlp" (1024-4096-BN-4096-BN-1000, the GPU benchmark).
ModelSpec preset_model(const std::string& name);
std::vector<std::string> preset_names();

}  // namespace dpv
