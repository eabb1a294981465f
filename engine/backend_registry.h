#pragma once
// Which backends this build has and how to make them: the only code that knows whether the CUDA
// target was linked in. Front ends ask `cuda_compiled_in()` (a build fact) and `cuda_available()`
// (a machine fact) instead of parsing version strings.
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dpv {

class Backend;
class Collectives;
class DeviceSet;
class ProcessGroup;

// True when this build contains the CUDA backend (cuBLAS, NCCL, the kernels).
bool cuda_compiled_in();
// True when the CUDA backend is built and at least one GPU can be used.
bool cuda_available();
int cuda_device_count();                 // 0 without a CUDA backend
std::string cuda_device_name(int ordinal);  // "NVIDIA H200"; throws without a CUDA backend
std::string cuda_build_info();           // "CUDA 13.0 ..., NCCL 2.27.3" or "no CUDA backend (...)"

std::unique_ptr<Backend> make_cpu_backend();
// The library the CPU backend multiplies a float32 or float64 product of `multiply_adds`
// (rows * cols * inner) with: "oneDNN sgemm", "OpenBLAS sgemm" or "OpenBLAS dgemm".
std::string cpu_gemm_library(bool float64, double multiply_adds);
// Throws dpv::Error naming the fix (use --devices cpu:K) when the build has no CUDA backend.
std::unique_ptr<Backend> make_cuda_backend(int ordinal, int virtual_slot);

// The collectives of a device set: host threads for CPU devices; NCCL or peer copies for GPUs.
std::unique_ptr<Collectives> make_host_collectives(std::shared_ptr<DeviceSet> devices);
std::unique_ptr<Collectives> make_collectives(std::shared_ptr<DeviceSet> devices);

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
