#pragma once
// What the checkpoint tests compare: the files of `dpv train --checkpoint DIR`, tensor by tensor.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/io/input_file.h"
#include "engine/io/safetensors.h"

namespace dpv::testing {

// Two runs in separate processes compared bit for bit must multiply every product shape with the
// same library. Each process times its own shapes (engine/core_backends.h: only a resumed run takes
// its checkpoint's choices), and a close race can go either way, so these tests pin DPV_GEMM (the
// children inherit it) for the object's lifetime.
class PinnedGemm {
 public:
  explicit PinnedGemm(const char* library) {
    if (const char* v = std::getenv("DPV_GEMM")) before_ = v;
    ::setenv("DPV_GEMM", library, 1);
  }
  ~PinnedGemm() {
    if (before_) ::setenv("DPV_GEMM", before_->c_str(), 1);
    else ::unsetenv("DPV_GEMM");
  }
  PinnedGemm(const PinnedGemm&) = delete;
  PinnedGemm& operator=(const PinnedGemm&) = delete;

 private:
  std::optional<std::string> before_;
};

inline std::string checkpoint_file(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "checkpoint-%06lld.safetensors", static_cast<long long>(step));
  return (std::filesystem::path(dir) / name).string();
}

inline std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

inline bool has_checkpoint(const std::string& dir) {
  if (!std::filesystem::exists(dir)) return false;
  const std::vector<std::string> names = names_in(dir);
  return std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.rfind("checkpoint-", 0) == 0; });
}

inline SafetensorsFile read_checkpoint(const std::string& file) {
  return parse_safetensors_file(read_file(file, kSafetensorsInput), file);
}

// Every tensor of both files, by name, with the same dtype, shape and bytes; and the same metadata.
inline void expect_same_checkpoint(const std::string& a, const std::string& b) {
  const SafetensorsFile fa = read_checkpoint(a), fb = read_checkpoint(b);
  ASSERT_EQ(fa.tensors.names(), fb.tensors.names());
  for (const auto& [name, ta] : fa.tensors.items()) {
    const Tensor& tb = fb.tensors.at(name);
    ASSERT_EQ(ta.dtype(), tb.dtype()) << name;
    ASSERT_EQ(ta.shape(), tb.shape()) << name;
    EXPECT_EQ(std::memcmp(ta.raw(), tb.raw(), ta.nbytes()), 0) << name << " differs";
  }
  EXPECT_EQ(fa.metadata, fb.metadata);
}

}  // namespace dpv::testing
