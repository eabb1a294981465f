// MNIST IDX files: any bytes, read as images and as labels, either load or throw dpv::Error, and
// what loads holds exactly what the header declared.
#include "engine/error.h"
#include "engine/io/idx.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dpv;
  const std::string bytes = fuzz::input_text(data, size);
  try {
    const Tensor images = parse_idx_images(bytes, "fuzz-images.idx");
    fuzz::require(images.ndim() == 2, "images are [N, rows*cols]");
    fuzz::require(static_cast<size_t>(images.numel()) + 16 == bytes.size(), "one float per pixel byte");
  } catch (const Error&) {
  }
  try {
    const Tensor labels = parse_idx_labels(bytes, "fuzz-labels.idx");
    fuzz::require(labels.ndim() == 1 && static_cast<size_t>(labels.numel()) + 8 == bytes.size(), "one label per byte");
    for (int64_t v : labels.to_int64()) fuzz::require(v >= 0 && v <= 9, "labels are digits");
  } catch (const Error&) {
  }
  return 0;
}
