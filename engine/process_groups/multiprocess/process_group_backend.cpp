#include "engine/process_groups/multiprocess/process_group_backend.h"

#include "engine/error.h"

namespace dpv::dist {

std::string name(ProcessGroupBackend backend) {
  switch (backend) {
    case ProcessGroupBackend::Gloo: return "gloo";
    case ProcessGroupBackend::Nccl: return "nccl";
  }
  throw Error("unknown process-group backend " + std::to_string(static_cast<int>(backend)));
}

std::vector<std::string> process_group_backend_names() {
  return {name(ProcessGroupBackend::Gloo), name(ProcessGroupBackend::Nccl)};
}

ProcessGroupBackend parse_process_group_backend(const std::string& text) {
  for (ProcessGroupBackend backend : {ProcessGroupBackend::Gloo, ProcessGroupBackend::Nccl})
    if (name(backend) == text) return backend;
  throw Error("'" + text + "' is not a backend: use gloo (CPU ranks) or nccl (GPU ranks)", ErrorClass::ValueError);
}

}  // namespace dpv::dist
