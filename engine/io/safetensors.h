#pragma once
// safetensors files (what safetensors.torch.save_file writes and load_file reads):
// 8-byte little-endian header size, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}},
// then the raw little-endian data. The reader trusts nothing: sizes, offsets, overlaps and dtypes are
// checked against the file before any data is read.
#include <map>
#include <string>

#include "engine/tensor_map.h"

namespace dpv {

// Host tensors in the header's data order. Throws dpv::Error naming the file and the problem.
TensorMap load_safetensors(const std::string& path);
TensorMap parse_safetensors(const std::string& bytes, const std::string& source);
// The tensors and the header's "__metadata__" (empty when the file has none).
struct SafetensorsFile {
  TensorMap tensors;
  std::map<std::string, std::string> metadata;
};
SafetensorsFile parse_safetensors_file(const std::string& bytes, const std::string& source);
// Writes atomically (temporary file in the same folder, then rename). Tensors may be on any device.
void save_safetensors(const std::string& path, const TensorMap& tensors,
                      const std::map<std::string, std::string>& metadata = {});
std::string serialize_safetensors(const TensorMap& tensors, const std::map<std::string, std::string>& metadata = {});

}  // namespace dpv
