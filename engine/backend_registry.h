#pragma once
// Which backends this build has and how to make them: the only code that knows whether the CUDA
// target was linked in. Front ends ask `cuda_compiled_in()` (a build fact) and `cuda_available()`
// (a machine fact) instead of parsing version strings.
//
// Defined by the backends target (engine/backends, dpv_backends), which links the engine core and,
// when built, the CUDA target; DeviceSet::create and describe_machine (engine/device.h) live there
// too. The core itself never calls these: what it makes by itself is in engine/core_backends.h,
// included here so one include serves a front end.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

// backend.h and process_group.h, not forward declarations: a front end that includes only this
// header must be able to hold and destroy what make_cuda_backend and make_nccl_process_group return.
#include "engine/backend.h"
#include "engine/core_backends.h"
#include "engine/process_groups/process_group.h"

namespace dpv {

// True when this build contains the CUDA backend (cuBLAS, NCCL, the kernels).
bool cuda_compiled_in();
// True when the CUDA backend is built and at least one GPU can be used.
bool cuda_available();
int cuda_device_count();                 // 0 without a CUDA backend
std::string cuda_device_name(int ordinal);  // "NVIDIA H200"; throws without a CUDA backend
std::string cuda_build_info();           // "CUDA 13.0 ..., NCCL 2.27.3" or "no CUDA backend (...)"

// Throws dpv::Error naming the fix (use --devices cpu:K) when the build has no CUDA backend.
std::unique_ptr<Backend> make_cuda_backend(int ordinal, int virtual_slot);

// The NCCL process group of one launched GPU rank (`dpv launch --backend nccl`): cudaSetDevice(local_rank)
// first, rank 0's ncclUniqueId passed to the others through the rendezvous store (store_set /
// store_get, which waits for the key), then ncclCommInitRank, as PyTorch does. Collectives run on
// the tensors' own device streams and give up (aborting the communicator) after `timeout_ms`.
// Throws dpv::Error naming the fix (--backend gloo) when the build has no CUDA backend.
using StoreSet = std::function<void(const std::string& key, const std::vector<char>& value)>;
using StoreGet = std::function<std::vector<char>(const std::string& key)>;
std::unique_ptr<ProcessGroup> make_nccl_process_group(int rank, int world_size, int local_rank, int64_t timeout_ms,
                                                      StoreSet store_set, StoreGet store_get);

}  // namespace dpv
