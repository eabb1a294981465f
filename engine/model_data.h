#pragma once
// Which data and how many classes a model takes, and data that fits it, so `dpv train`, `dpv bench`
// and the app work with any preset: the spiral for 2-feature MLPs, Gaussian blobs for other MLPs,
// class-dependent images for CNNs, or MNIST IDX files when given.
#include <cstdint>
#include <string>

#include "engine/datasets.h"
#include "engine/model_spec.h"

namespace dpv {

// What the model eats: features per sample (MLPs) or a [C, H, W] image (CNNs), and its classes.
struct ModelInputShape {
  bool image = false;
  int64_t features = 0;          // MLPs
  int64_t channels = 0, height = 0, width = 0;  // CNNs
  int classes = 0;
};

ModelInputShape input_shape_of(const ModelSpec& spec);

// kind: "auto" (spiral for 2 features, images for CNNs, blobs otherwise), "spiral", "blobs".
// Throws dpv::Error when the kind does not fit the model (e.g. spiral for a 784-feature MLP).
Dataset make_data_for_model(const ModelSpec& spec, int64_t n, uint64_t seed, const std::string& kind = "auto");

// MNIST IDX files, checked against the model's input features and classes.
Dataset load_idx_for_model(const ModelSpec& spec, const std::string& images, const std::string& labels);

// The batch size a preset is usually run with (simple 32, mnist-mlp 64, mlp-large 256, cnn 32, mlp-bn 64).
int64_t default_batch(const std::string& preset);

}  // namespace dpv
