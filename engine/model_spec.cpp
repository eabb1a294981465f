#include "engine/model_spec.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/checked_math.h"
#include "engine/error.h"
#include "engine/io/checked_json.h"
#include "engine/io/input_file.h"

namespace dpv {

const char* layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::Linear: return "linear";
    case LayerKind::ReLU: return "relu";
    case LayerKind::Flatten: return "flatten";
    case LayerKind::Conv2d: return "conv2d";
    case LayerKind::BatchNorm1d: return "batchnorm1d";
    case LayerKind::BatchNorm2d: return "batchnorm2d";
  }
  return "?";
}

namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

constexpr LayerKind kLayerKinds[] = {LayerKind::Linear, LayerKind::ReLU,        LayerKind::Flatten,
                                     LayerKind::Conv2d, LayerKind::BatchNorm1d, LayerKind::BatchNorm2d};

const std::vector<std::string>& known_layer_types() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> names;
    for (LayerKind k : kLayerKinds) names.push_back(layer_kind_name(k));
    return names;
  }();
  return types;
}

const std::vector<std::string>& top_level_keys() {
  static const std::vector<std::string> keys{"layers", "loss", "dtype"};
  return keys;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return text;
}

// Reads the fields of one layer object, remembering which keys were used so leftovers
// (typos such as "out_feature") are reported instead of silently ignored.
class LayerReader {
 public:
  LayerReader(const Json& object, std::string where) : object_(object), where_(std::move(where)) {}

  // An integer field in [minimum, maximum]; the bound keeps every later shape product in range.
  void integer(const char* key, int64_t& out, bool required, int64_t minimum, int64_t maximum) {
    const Json* value = take(key, required);
    if (!value) return;
    if (value->is_number_float() || !value->is_number()) {
      fail(std::string("'") + key + "' must be an integer, got " + json_excerpt(*value));
    }
    // JSON integers above int64 arrive as unsigned; they are far beyond any sensible size.
    const bool beyond_int64 = value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
    if (beyond_int64 || value->get<int64_t>() > maximum)
      fail(std::string("'") + key + "' = " + json_excerpt(*value) + " is too large (at most " + std::to_string(maximum) + ")");
    out = value->get<int64_t>();
    if (out < minimum) {
      fail(std::string("'") + key + "' must be " + (minimum == 1 ? "positive" : "at least " + std::to_string(minimum)) +
           ", got " + std::to_string(out));
    }
  }

  void boolean(const char* key, bool& out) {
    const Json* value = take(key, false);
    if (!value) return;
    if (!value->is_boolean()) fail(std::string("'") + key + "' must be true or false, got " + json_excerpt(*value));
    out = value->get<bool>();
  }

  void real(const char* key, double& out, const std::function<bool(double)>& valid, const char* rule) {
    const Json* value = take(key, false);
    if (!value) return;
    if (!value->is_number()) fail(std::string("'") + key + "' must be a number, got " + json_excerpt(*value));
    out = value->get<double>();
    if (!valid(out)) fail(std::string("'") + key + "' must be " + rule + ", got " + json_excerpt(*value));
  }

  // A weight of this shape must hold at most kMaxLayerWeights elements.
  void check_weight_size(const std::vector<int64_t>& shape) const {
    std::optional<int64_t> elements = 1;
    std::string text;
    for (int64_t d : shape) {
      elements = checked_mul(elements, d);
      text += (text.empty() ? "" : ", ") + std::to_string(d);
    }
    if (!elements || *elements > kMaxLayerWeights)
      fail("the weight [" + text + "] would hold " + (elements ? std::to_string(*elements) : std::string("more than 2^63")) +
           " elements, more than a layer may have (" + std::to_string(kMaxLayerWeights) + ")");
  }

  // After every field was read: anything left is a key this layer type does not take.
  void reject_unknown_keys(const std::vector<std::string>& accepted) const {
    for (const auto& [key, value] : object_.items()) {
      if (key == "type" || used_.count(key)) continue;
      fail("unknown key '" + key + "'" +
           (accepted.empty() ? std::string(" (this layer takes no arguments)") : " (accepted: " + join(accepted) + ")"));
    }
  }

  [[noreturn]] void fail(const std::string& problem) const { throw Error(where_ + ": " + problem, ErrorClass::ValueError); }

 private:
  const Json* take(const char* key, bool required) {
    used_.insert(key);
    const auto it = object_.find(key);
    if (it == object_.end()) {
      if (required) fail(std::string("missing '") + key + "'");
      return nullptr;
    }
    return &*it;
  }

  const Json& object_;
  std::string where_;
  std::set<std::string> used_;
};

LayerSpec parse_layer(const Json& layer, size_t index, const std::string& source) {
  const std::string at = source + ": layer " + std::to_string(index);
  check(layer.is_object(), at + ": expected an object such as {\"type\": \"linear\", ...}, got " + json_excerpt(layer),
        ErrorClass::ValueError);
  const auto type_it = layer.find("type");
  check(type_it != layer.end(), at + ": missing 'type' (one of " + join(known_layer_types()) + ")", ErrorClass::ValueError);
  check(type_it->is_string(), at + ": 'type' must be a string, got " + json_excerpt(*type_it), ErrorClass::ValueError);
  LayerSpec spec;
  // PyTorch's class names ("Linear", "BatchNorm1d") are accepted as well as the lower-case ones.
  const std::string type = lower(type_it->get<std::string>());
  const auto& known = known_layer_types();
  const auto found = std::find(known.begin(), known.end(), type);
  if (found == known.end()) {
    throw Error(at + ": unknown layer type '" + type_it->get<std::string>() + "' (known types: " + join(known) + ")",
                ErrorClass::ValueError);
  }
  spec.kind = kLayerKinds[found - known.begin()];

  LayerReader read(layer, at + " (" + type + ")");
  auto probability = [](double v) { return v >= 0.0 && v <= 1.0; };
  auto positive = [](double v) { return v > 0.0; };
  if (spec.kind == LayerKind::Linear) {
    read.integer("in_features", spec.in_features, true, 1, kMaxModelWidth);
    read.integer("out_features", spec.out_features, true, 1, kMaxModelWidth);
    read.boolean("bias", spec.bias);
    read.reject_unknown_keys({"in_features", "out_features", "bias"});
    read.check_weight_size({spec.out_features, spec.in_features});
  } else if (spec.kind == LayerKind::Conv2d) {
    read.integer("in_channels", spec.in_channels, true, 1, kMaxModelWidth);
    read.integer("out_channels", spec.out_channels, true, 1, kMaxModelWidth);
    read.integer("kernel_size", spec.kernel_size, true, 1, kMaxKernelGeometry);
    read.integer("stride", spec.stride, false, 1, kMaxKernelGeometry);
    read.integer("padding", spec.padding, false, 0, kMaxKernelGeometry);
    read.boolean("bias", spec.bias);
    read.reject_unknown_keys({"in_channels", "out_channels", "kernel_size", "stride", "padding", "bias"});
    read.check_weight_size({spec.out_channels, spec.in_channels, spec.kernel_size, spec.kernel_size});
  } else if (is_batchnorm(spec.kind)) {
    read.integer("num_features", spec.num_features, true, 1, kMaxModelWidth);
    read.real("eps", spec.eps, positive, "positive");
    read.real("momentum", spec.momentum, probability, "between 0 and 1");
    read.reject_unknown_keys({"num_features", "eps", "momentum"});
  } else {  // relu, flatten
    read.reject_unknown_keys({});
  }
  return spec;
}

OrderedJson layer_to_json(const LayerSpec& l) {
  OrderedJson j{{"type", layer_kind_name(l.kind)}};
  if (l.kind == LayerKind::Linear) {
    j["in_features"] = l.in_features;
    j["out_features"] = l.out_features;
    j["bias"] = l.bias;
  } else if (l.kind == LayerKind::Conv2d) {
    j["in_channels"] = l.in_channels;
    j["out_channels"] = l.out_channels;
    j["kernel_size"] = l.kernel_size;
    j["stride"] = l.stride;
    j["padding"] = l.padding;
    j["bias"] = l.bias;
  } else if (is_batchnorm(l.kind)) {
    j["num_features"] = l.num_features;
    j["eps"] = l.eps;
    j["momentum"] = l.momentum;
  }
  return j;
}

// Builders for the presets.
LayerSpec linear(int64_t in, int64_t out) {
  LayerSpec l;
  l.kind = LayerKind::Linear;
  l.in_features = in;
  l.out_features = out;
  return l;
}
LayerSpec batchnorm(LayerKind kind, int64_t features) {
  LayerSpec l;
  l.kind = kind;
  l.num_features = features;
  return l;
}
LayerSpec plain(LayerKind kind) {
  LayerSpec l;
  l.kind = kind;
  return l;
}
LayerSpec conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding) {
  LayerSpec l;
  l.kind = LayerKind::Conv2d;
  l.in_channels = in;
  l.out_channels = out;
  l.kernel_size = kernel;
  l.stride = stride;
  l.padding = padding;
  return l;
}

// in -> hidden, BN, ReLU, hidden -> hidden, BN, ReLU, hidden -> out.
ModelSpec mlp_with_batchnorm(int64_t in, int64_t hidden, int64_t out) {
  ModelSpec spec;
  spec.layers = {linear(in, hidden),     batchnorm(LayerKind::BatchNorm1d, hidden), plain(LayerKind::ReLU),
                 linear(hidden, hidden), batchnorm(LayerKind::BatchNorm1d, hidden), plain(LayerKind::ReLU),
                 linear(hidden, out)};
  return spec;
}

}  // namespace

ModelSpec parse_model_spec(const std::string& json_text, const std::string& source) {
  const bool blank = std::all_of(json_text.begin(), json_text.end(), [](unsigned char ch) { return std::isspace(ch); });
  check(!blank, source + ": the model spec is empty (expected {\"layers\": [...]})", ErrorClass::ValueError);
  const Json root = parse_json<Json>(json_text, source, kModelSpecInput.max_bytes);
  check(root.is_object(), source + ": expected a JSON object {\"layers\": [...]}, got " + std::string(root.type_name()),
        ErrorClass::ValueError);
  for (const auto& [key, value] : root.items()) {
    const auto& keys = top_level_keys();
    check(std::find(keys.begin(), keys.end(), key) != keys.end(),
          source + ": unknown key '" + key + "' (accepted: " + join(keys) + ")", ErrorClass::ValueError);
  }

  ModelSpec spec;
  const auto layers = root.find("layers");
  check(layers != root.end(), source + ": missing \"layers\" (a list such as [{\"type\": \"linear\", ...}])",
        ErrorClass::ValueError);
  check(layers->is_array(), source + ": \"layers\" must be a list, got " + std::string(layers->type_name()),
        ErrorClass::ValueError);
  check(!layers->empty(), source + ": \"layers\" is empty; a model needs at least one layer", ErrorClass::ValueError);
  for (size_t i = 0; i < layers->size(); ++i) spec.layers.push_back(parse_layer((*layers)[i], i, source));

  if (const auto loss = root.find("loss"); loss != root.end()) {
    check(loss->is_string(), source + ": \"loss\" must be a string, got " + json_excerpt(*loss), ErrorClass::ValueError);
    spec.loss = loss->get<std::string>();
    check(spec.loss == "cross_entropy",
          source + ": unknown loss '" + spec.loss + "' (supported: cross_entropy, i.e. nn.CrossEntropyLoss)",
          ErrorClass::ValueError);
  }
  if (const auto dtype = root.find("dtype"); dtype != root.end()) {
    check(dtype->is_string(), source + ": \"dtype\" must be a string, got " + json_excerpt(*dtype), ErrorClass::ValueError);
    const std::string name = dtype->get<std::string>();
    if (name == "float32" || name == "float")
      spec.dtype = DType::Float32;
    else if (name == "float64" || name == "double")
      spec.dtype = DType::Float64;
    else
      throw Error(source + ": \"dtype\" must be float32 or float64, got '" + name + "'", ErrorClass::ValueError);
  }
  return spec;
}

ModelSpec load_model_spec(const std::string& path) { return parse_model_spec(read_file(path, kModelSpecInput), path); }

std::string model_spec_to_json(const ModelSpec& spec) {
  OrderedJson layers = OrderedJson::array();
  for (const LayerSpec& l : spec.layers) layers.push_back(layer_to_json(l));
  OrderedJson root{{"layers", std::move(layers)}, {"loss", spec.loss}, {"dtype", dtype_name(spec.dtype)}};
  return root.dump(2) + "\n";
}

std::vector<std::string> preset_names() { return {"simple", "mlp-bn", "mnist-mlp", "mlp-large", "cnn", "gpu-mlp"}; }

ModelSpec preset_model(const std::string& name) {
  if (name == "simple") {  // the source document's SimpleModel: nn.Linear(10, 2)
    ModelSpec spec;
    spec.layers = {linear(10, 2)};
    return spec;
  }
  if (name == "mlp-bn") return mlp_with_batchnorm(2, 32, 3);  // the 3-class spiral
  if (name == "mnist-mlp") return mlp_with_batchnorm(784, 256, 10);
  if (name == "mlp-large") return mlp_with_batchnorm(784, 1024, 10);
  if (name == "gpu-mlp") return mlp_with_batchnorm(1024, 4096, 1000);
  if (name == "cnn") {  // [N, 3, 32, 32] -> [N, 8, 32, 32] -> [N, 16, 16, 16] -> [N, 10]
    ModelSpec spec;
    spec.layers = {conv2d(3, 8, 3, 1, 1),  batchnorm(LayerKind::BatchNorm2d, 8),  plain(LayerKind::ReLU),
                   conv2d(8, 16, 3, 2, 1), batchnorm(LayerKind::BatchNorm2d, 16), plain(LayerKind::ReLU),
                   plain(LayerKind::Flatten),       linear(16 * 16 * 16, 10)};
    return spec;
  }
  throw Error("unknown model preset '" + name + "' (presets: " + join(preset_names()) + ")", ErrorClass::ValueError);
}

}  // namespace dpv
