#pragma once
// What the engine core makes by itself: the CPU backend, the host-thread collectives, and the
// collectives of any device set. The core never links the CUDA target: a CUDA device set is made
// by the backends target (engine/backends, dpv_backends, see engine/backend_registry.h), which
// installs the GPU collectives' factory here before it hands out such a set.
#include <cstdint>
#include <memory>
#include <string>

namespace dpv {

class Backend;
class Collectives;
class DeviceSet;
class Tensor;

std::unique_ptr<Backend> make_cpu_backend();
// The library the CPU backend multiplies a float32 or float64 product of `multiply_adds`
// (rows * cols * inner) with: "oneDNN sgemm", "OpenBLAS sgemm" or "OpenBLAS dgemm".
std::string cpu_gemm_library(bool float64, double multiply_adds);

// The CPU backend's GEMM on its own, for timing it against the BLAS libraries (`dpv bench`'s
// reference): c[rows,cols] = alpha * op(a) @ op(b) + beta * c, as a Linear layer calls it, on host
// tensors, without handing a front end the whole Backend interface.
class CpuGemm {
 public:
  CpuGemm();
  ~CpuGemm();
  CpuGemm(const CpuGemm&) = delete;
  CpuGemm& operator=(const CpuGemm&) = delete;
  void run(bool trans_a, bool trans_b, int64_t rows, int64_t cols, int64_t inner, double alpha, const Tensor& a,
           const Tensor& b, double beta, Tensor& c);

 private:
  std::unique_ptr<Backend> backend_;
};

// The collectives of a device set: host threads for CPU devices; NCCL or peer copies for GPUs
// (through the installed GPU factory).
std::unique_ptr<Collectives> make_host_collectives(std::shared_ptr<DeviceSet> devices);
std::unique_ptr<Collectives> make_collectives(std::shared_ptr<DeviceSet> devices);

// The hook through which the core reaches the GPU collectives without depending on the target that
// has them. Installing it again replaces the factory (the backends target always installs the same).
using GpuCollectivesFactory = std::unique_ptr<Collectives> (*)(std::shared_ptr<DeviceSet> devices);
void install_gpu_collectives_factory(GpuCollectivesFactory factory);

}  // namespace dpv
