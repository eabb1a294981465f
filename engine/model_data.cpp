#include "engine/model_data.h"

#include "engine/error.h"
#include "engine/io/idx.h"

namespace dpv {

ModelInputShape input_shape_of(const ModelSpec& spec) {
  check(!spec.layers.empty(), "the model has no layers", ErrorClass::ValueError);
  ModelInputShape s;
  const LayerSpec& first = spec.layers.front();
  if (first.kind == LayerKind::Conv2d) {
    // The CNN presets take 32x32 images (CIFAR-sized), as the bench's 3x32x32 input.
    s.image = true;
    s.channels = first.in_channels;
    s.height = s.width = 32;
  } else if (first.kind == LayerKind::Linear) {
    s.features = first.in_features;
  } else {
    throw Error("cannot make data for a model whose first layer is '" + std::string(layer_kind_name(first.kind)) +
                    "': it must start with linear or conv2d",
                ErrorClass::ValueError);
  }
  for (auto it = spec.layers.rbegin(); it != spec.layers.rend(); ++it) {
    if (it->kind == LayerKind::Linear) {
      s.classes = static_cast<int>(it->out_features);
      break;
    }
  }
  check(s.classes >= 2, "the model's last linear layer must have at least 2 outputs (classes)", ErrorClass::ValueError);
  return s;
}

Dataset make_data_for_model(const ModelSpec& spec, int64_t n, uint64_t seed, const std::string& kind) {
  const ModelInputShape s = input_shape_of(spec);
  if (s.image) {
    check(kind == "auto" || kind == "images", "'" + kind + "' data does not fit a CNN (it takes images)", ErrorClass::ValueError);
    return make_images(n, s.classes, s.channels, s.height, s.width, seed, spec.dtype);
  }
  if (kind == "spiral" || (kind == "auto" && s.features == 2)) {
    check(s.features == 2,
          "'spiral' data has 2 features but the model takes " + std::to_string(s.features), ErrorClass::ValueError);
    return make_spiral(n, s.classes, seed, spec.dtype);
  }
  check(kind == "auto" || kind == "blobs", "unknown data kind '" + kind + "' (auto, spiral, blobs)", ErrorClass::ValueError);
  return make_blobs(n, s.classes, s.features, seed, spec.dtype);
}

Dataset load_idx_for_model(const ModelSpec& spec, const std::string& images, const std::string& labels) {
  const ModelInputShape s = input_shape_of(spec);
  IdxDataset idx = load_idx_dataset(images, labels);
  check(!s.image && idx.images.dim(1) == s.features,
        images + ": the IDX images have " + std::to_string(idx.images.dim(1)) + " pixels per sample but the model takes " +
            (s.image ? std::string("images") : std::to_string(s.features) + " features"),
        ErrorClass::ValueError);
  Dataset d;
  d.inputs = idx.images;
  d.targets = idx.labels;
  d.classes = s.classes;
  d.name = "MNIST (" + images + ")";
  for (int64_t label : d.targets.to_int64()) {
    check(label >= 0 && label < s.classes,
          "label " + std::to_string(label) + " in '" + labels + "' is outside the model's " +
              std::to_string(s.classes) + " classes",
          ErrorClass::ValueError);
  }
  if (spec.dtype != DType::Float32) {
    Tensor converted = Tensor::from_doubles(d.inputs.shape(), spec.dtype, d.inputs.to_doubles());
    d.inputs = converted;
  }
  return d;
}

int64_t default_batch(const std::string& preset) {
  if (preset == "gpu-mlp") return 4096;
  if (preset == "mlp-large") return 256;
  if (preset == "mnist-mlp" || preset == "mlp-bn") return 64;
  return 32;
}

}  // namespace dpv
