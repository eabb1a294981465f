#pragma once
// Output files are checked before any work: a missing or unwritable folder, or an output that is
// one of the command's inputs, fails at once instead of after minutes of training or measuring.
#include <string>
#include <utility>
#include <vector>

namespace dpv::cli {

// The folder the write lands in (symbolic links followed, as the write follows them) exists, is a
// folder and is writable, and the output itself is not a folder. Throws dpv::Error in Python's
// kinds (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError), prefixed
// with `option` ("--trace: [Errno 2] No such file or directory: 'nodir'").
void check_output_path(const std::string& path, const std::string& option);

// Refuses an output that is the same file as one of `inputs` ({option, path}; empty paths are
// skipped): writing it would replace that input. Compares device and inode, so links and other
// spellings of the same path are caught.
void check_not_an_input(const std::string& path, const std::string& option,
                        const std::vector<std::pair<std::string, std::string>>& inputs);

}  // namespace dpv::cli
