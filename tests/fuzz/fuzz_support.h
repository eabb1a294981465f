#pragma once
// Shared by the libFuzzer harnesses: the input as a string, and a check that stops the run with a
// message (libFuzzer then saves the input as a crash artifact).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace dpv::fuzz {

inline std::string input_text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// A property every input must keep; failing it is a bug, reported like a crash.
inline void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz property violated: %s\n", what);
  std::abort();
}

}  // namespace dpv::fuzz
