#pragma once
#include <string>

namespace dpv {

// Writes `bytes` to `path` atomically: a temporary file beside it, flushed, then renamed over it.
// Throws dpv::Error (naming the path and the system's reason) and leaves no partial file behind.
void write_file_atomic(const std::string& path, const std::string& bytes);
// Reads a whole file; throws dpv::Error naming the path when it cannot.
std::string read_file(const std::string& path);

}  // namespace dpv
