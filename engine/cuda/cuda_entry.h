#pragma once
// The CUDA target's entry points, called only by engine/backends/backend_registry.cpp when the target is
// linked in. No CUDA types here: the registry is ordinary C++ of the backends target.
#include <cstdint>
#include <memory>
#include <string>

#include "engine/backend_registry.h"

namespace dpv {
class Backend;
class Collectives;
class DeviceSet;
class ProcessGroup;
}  // namespace dpv

namespace dpv::cuda_entry {

std::unique_ptr<Backend> make_backend(int ordinal, int virtual_slot);
// NCCL when every device of the set is a distinct GPU, peer copies for virtual devices.
std::unique_ptr<Collectives> make_collectives(std::shared_ptr<DeviceSet> devices);
bool available();                      // at least one usable GPU
int device_count();
std::string device_name(int ordinal);  // "NVIDIA H200"
std::string build_info();
// One launched rank's NCCL process group (see make_nccl_process_group in engine/backend_registry.h).
std::unique_ptr<ProcessGroup> make_nccl_process_group(int rank, int world_size, int local_rank, int64_t timeout_ms,
                                                      StoreSet store_set, StoreGet store_get);              // "CUDA 13.0 (runtime ..., driver ...), cuBLAS ..., NCCL ..."

}  // namespace dpv::cuda_entry
