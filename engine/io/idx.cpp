#include "engine/io/idx.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "engine/error.h"
#include "engine/io/input_file.h"

namespace dpv {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension
constexpr int kMaxLabel = 9;                   // MNIST-style digits

uint32_t read_u32_be(const std::string& bytes, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + at);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string hex32(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

const char* idx_kind(uint32_t magic) {
  if (magic == kImagesMagic) return "an IDX image file";
  if (magic == kLabelsMagic) return "an IDX label file";
  return "not an IDX file of unsigned bytes";
}

// Checks the magic number and returns the dimensions the header declares, after making sure the
// file length is exactly header + data: a header that lies about sizes is never trusted.
std::vector<uint64_t> read_header(const std::string& bytes, const std::string& path, uint32_t want_magic,
                                  const char* want_kind) {
  if (bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f && static_cast<unsigned char>(bytes[1]) == 0x8b)
    throw Error(path + ": the file is gzip-compressed; unpack it first (gunzip " + path + ")");
  check(bytes.size() >= 4, path + ": " + std::to_string(bytes.size()) +
                               " bytes is too short for an IDX file (it starts with a 4-byte magic number)");
  const uint32_t magic = read_u32_be(bytes, 0);
  if (magic != want_magic) {
    throw Error(path + ": magic number " + hex32(magic) + " (" + idx_kind(magic) + "), expected " + hex32(want_magic) +
                " (" + want_kind + ")");
  }
  const size_t ndims = magic & 0xff;
  const size_t header_bytes = 4 + 4 * ndims;
  check(bytes.size() >= header_bytes, path + ": the file ends inside its " + std::to_string(header_bytes) +
                                          "-byte header (truncated file)");
  std::vector<uint64_t> dims;
  uint64_t payload = 1;
  for (size_t i = 0; i < ndims; ++i) {
    dims.push_back(read_u32_be(bytes, 4 + 4 * i));
    check(!__builtin_mul_overflow(payload, dims.back(), &payload), path + ": the header's sizes overflow (corrupt file)");
  }
  const uint64_t held = bytes.size() - header_bytes;
  if (held < payload) {
    throw Error(path + ": the header promises " + std::to_string(payload) + " data bytes but the file holds only " +
                std::to_string(held) + " (truncated or corrupt file)");
  }
  if (held > payload) {
    throw Error(path + ": the file has " + std::to_string(held - payload) +
                " bytes more than its header declares (corrupt file, or the header lies about its sizes)");
  }
  return dims;
}

}  // namespace

Tensor load_idx_images(const std::string& path) { return parse_idx_images(read_file(path, kIdxInput), path); }
Tensor load_idx_labels(const std::string& path) { return parse_idx_labels(read_file(path, kIdxInput), path); }

Tensor parse_idx_images(const std::string& bytes, const std::string& path) {
  const std::vector<uint64_t> dims = read_header(bytes, path, kImagesMagic, "an IDX image file");
  const uint64_t count = dims[0], rows = dims[1], cols = dims[2];
  check(rows > 0 && cols > 0, path + ": images of " + std::to_string(rows) + "x" + std::to_string(cols) +
                                  " pixels are empty");
  // Two 32-bit sizes: the product fits in uint64 but, with no images, need not fit in int64.
  check(rows * cols <= static_cast<uint64_t>(INT64_MAX), path + ": images of " + std::to_string(rows) + "x" +
                                                             std::to_string(cols) + " pixels are too large");
  const int64_t pixels = static_cast<int64_t>(rows * cols);
  Tensor images = Tensor::empty({static_cast<int64_t>(count), pixels}, DType::Float32);  // [N, rows*cols]
  const auto* src = reinterpret_cast<const unsigned char*>(bytes.data() + 16);
  float* dst = images.data<float>();
  const size_t total = static_cast<size_t>(count) * static_cast<size_t>(pixels);
  for (size_t i = 0; i < total; ++i) dst[i] = static_cast<float>(src[i]) / 255.0f;
  return images;
}

Tensor parse_idx_labels(const std::string& bytes, const std::string& path) {
  const std::vector<uint64_t> dims = read_header(bytes, path, kLabelsMagic, "an IDX label file");
  const uint64_t count = dims[0];
  Tensor labels = Tensor::empty({static_cast<int64_t>(count)}, DType::Int64);  // [N]
  const auto* src = reinterpret_cast<const unsigned char*>(bytes.data() + 8);
  int64_t* dst = labels.data<int64_t>();
  for (uint64_t i = 0; i < count; ++i) {
    if (src[i] > kMaxLabel) {
      throw Error(path + ": label " + std::to_string(i) + " is " + std::to_string(src[i]) +
                  "; labels must be class numbers 0 to " + std::to_string(kMaxLabel));
    }
    dst[i] = src[i];
  }
  return labels;
}

IdxDataset load_idx_dataset(const std::string& images_path, const std::string& labels_path) {
  IdxDataset data;
  data.images = load_idx_images(images_path);
  data.labels = load_idx_labels(labels_path);
  const int64_t n_images = data.images.dim(0), n_labels = data.labels.dim(0);
  if (n_images != n_labels) {
    throw Error(images_path + " holds " + std::to_string(n_images) + " images but " + labels_path + " holds " +
                std::to_string(n_labels) + " labels; they must match one to one");
  }
  check(n_images > 0, images_path + ": the data set holds no images");
  const int64_t* labels = data.labels.data<int64_t>();
  const int64_t max_label = *std::max_element(labels, labels + n_labels);
  data.classes = static_cast<int>(std::max<int64_t>(max_label + 1, 2));
  return data;
}

}  // namespace dpv
