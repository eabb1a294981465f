#pragma once
// The PyTorch fixture folders (tests/fixtures/<folder>/<case>/: case.json, model.json,
// state.safetensors, batch.safetensors, expected.safetensors), as the DDP and ZeRO fixture tests
// read them.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/io/safetensors.h"

namespace dpv::test {

inline std::filesystem::path fixture_dir(const std::string& folder) {
  return std::filesystem::path(DPV_TEST_DATA_DIR) / folder;
}

// The cases of `folder` (those with a case.json), sorted; none when the folder is missing.
inline std::vector<std::string> fixture_cases(const std::string& folder) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  if (!fs::exists(fixture_dir(folder))) return names;
  for (const auto& entry : fs::directory_iterator(fixture_dir(folder)))
    if (fs::exists(entry.path() / "case.json")) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The __metadata__ of a safetensors file, read by the engine's own parser.
inline std::map<std::string, std::string> metadata_of(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return parse_safetensors_file(bytes.str(), file.string()).metadata;
}

}  // namespace dpv::test
