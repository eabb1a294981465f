#pragma once
// What the engine core makes by itself: the CPU backend, the host-thread collectives, and the
// collectives of any device set. The core never links the CUDA target: a CUDA device set is made
// by the backends target (engine/backends, dpv_backends, see engine/backend_registry.h), which
// installs the GPU collectives' factory here before it hands out such a set.
#include <memory>
#include <string>

namespace dpv {

class Backend;
class Collectives;
class DeviceSet;

std::unique_ptr<Backend> make_cpu_backend();
// The library the CPU backend multiplies a float32 or float64 product of `multiply_adds`
// (rows * cols * inner) with: "oneDNN sgemm", "OpenBLAS sgemm" or "OpenBLAS dgemm".
std::string cpu_gemm_library(bool float64, double multiply_adds);

// The collectives of a device set: host threads for CPU devices; NCCL or peer copies for GPUs
// (through the installed GPU factory).
std::unique_ptr<Collectives> make_host_collectives(std::shared_ptr<DeviceSet> devices);
std::unique_ptr<Collectives> make_collectives(std::shared_ptr<DeviceSet> devices);

// The hook through which the core reaches the GPU collectives without depending on the target that
// has them. Installing it again replaces the factory (the backends target always installs the same).
using GpuCollectivesFactory = std::unique_ptr<Collectives> (*)(std::shared_ptr<DeviceSet> devices);
void install_gpu_collectives_factory(GpuCollectivesFactory factory);

}  // namespace dpv
