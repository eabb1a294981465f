#pragma once
// The process-group backend of a launched job, as torch.distributed names them: gloo (CPU ranks,
// tensors in host memory) or nccl (one GPU per rank). Written as a name in DPV_BACKEND and in
// `dpv launch --backend`; a value everywhere else.
#include <string>
#include <string_view>
#include <vector>

namespace dpv::dist {

enum class ProcessGroupBackend { Gloo, Nccl };

// "gloo" or "nccl".
std::string name(ProcessGroupBackend backend);
// Every backend's name, in the enum's order: a command line's choices.
std::vector<std::string> process_group_backend_names();
// The backend called `text`; throws dpv::Error (ValueError) "'mpi' is not a backend: use gloo (CPU
// ranks) or nccl (GPU ranks)" for any other name.
ProcessGroupBackend parse_process_group_backend(const std::string& text);

// A backend equals its name, as written in DPV_BACKEND or --backend ("nccl").
inline bool operator==(ProcessGroupBackend backend, std::string_view text) { return name(backend) == text; }

}  // namespace dpv::dist
