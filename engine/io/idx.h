#pragma once
// MNIST-format IDX files (magic 0x00000803 for uint8 images [N, rows, cols], 0x00000801 for uint8
// labels [N]). Every size in the header is checked against the file length before reading.
#include <string>

#include "engine/tensor.h"

namespace dpv {

struct IdxDataset {
  Tensor images;  // [N, rows*cols] float32 in [0, 1] (pixel / 255)
  Tensor labels;  // [N] int64
  int classes = 10;
};

// Throws dpv::Error naming the file and what is wrong (bad magic, truncated data, count mismatch).
IdxDataset load_idx_dataset(const std::string& images_path, const std::string& labels_path);
Tensor load_idx_images(const std::string& path);  // [N, rows*cols] float32
Tensor load_idx_labels(const std::string& path);  // [N] int64
// The same from a file's bytes; `source` names it in errors.
Tensor parse_idx_images(const std::string& bytes, const std::string& source);
Tensor parse_idx_labels(const std::string& bytes, const std::string& source);

}  // namespace dpv
