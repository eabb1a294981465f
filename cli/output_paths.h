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

// An output a command writes, or an input it reads: the flag that named it and its path
// ("--trace", "job.json"), or a derived name ("rank 0's trace of --trace", "job.rank0.json").
struct NamedPath {
  std::string option;
  std::string path;
};

// Refuses a command whose outputs (derived per-rank names included) are not all distinct files,
// none of them one of its inputs: writing one would replace an input, or one output would replace
// another. Compares file identity (device and inode) for files that exist, and the absolute
// normalised path (symbolic links of existing folders resolved) otherwise. Empty paths are skipped.
void check_outputs_distinct(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

// `dpv train`'s --trace check: not an input, and, for a rank of a launched --ddp job, none of the
// per-rank traces it derives (rank_trace_path, one per rank of the job) is an input or --trace.
void check_trace_outputs(const std::string& trace, bool ddp, const std::vector<std::pair<std::string, std::string>>& inputs);

}  // namespace dpv::cli
