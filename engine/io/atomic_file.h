#pragma once
#include <string>

#include "engine/error.h"

namespace dpv {

// Writes `bytes` to `path` atomically: a temporary file beside it, flushed, then renamed over it.
// A symbolic link is written through, as torch.save (open(path, "wb")) does: the link stays and
// its target gets the new bytes. Throws dpv::Error (naming the path and the system's reason) and
// leaves no partial file behind, also when SIGINT/SIGTERM/SIGHUP arrives during the write
// (engine/io/temp_file_cleanup.h). An existing `path` that is not a regular file (a device, a
// FIFO, a socket) is refused, never replaced. Inputs are read with read_file (engine/io/input_file.h).
void write_file_atomic(const std::string& path, const std::string& bytes);

// write_target(path) after the checks write_file_atomic makes before writing: throws dpv::Error
// for an empty name, a folder (IsADirectoryError) or an existing file that is not a regular file.
// Front ends call it to refuse an output before the work that produces it.
std::string checked_write_target(const std::string& path);

// The file a write to `path` lands in: `path` itself, or where its chain of symbolic links ends
// (relative links resolved against their folder). Throws dpv::Error for a loop of links.
std::string write_target(const std::string& path);

// A system error in the words Python uses for the same failure: kind FileNotFoundError,
// PermissionError, IsADirectoryError, NotADirectoryError or OSError, and the message
// "[Errno 2] No such file or directory: 'path'" plus `context` (" (while ...)") when given.
Error file_error(int err, const std::string& path, const std::string& context = "");

}  // namespace dpv
