// What the CUDA backend offers on this machine, and the factories the engine calls:
// cuda_available(), cuda_device_count(), cuda_device_name(), cuda_build_info(),
// make_cuda_backend(). (make_cuda_collectives is in cuda_collectives.cpp.) The no-CUDA build
// defines the same symbols in engine/cuda_stub/no_cuda.cc.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "engine/backend.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_entry.h"
#include "engine/device.h"
#include "engine/error.h"

namespace dpv {

namespace {

std::string version_str(int v) {  // 12080 -> "12.8"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// One look at the GPUs per process: the answer does not change while it runs.
struct Probe {
  int count = 0;
  cudaError_t error = cudaSuccess;
};

const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    r.error = cudaGetDeviceCount(&r.count);
    if (r.error != cudaSuccess) {
      cudaGetLastError();
      r.count = 0;
    }
    return r;
  }();
  return p;
}

// Why no GPU can be used, in words a user can act on.
std::string no_gpu_reason() {
  const Probe& p = probe();
  int driver = 0;
  cudaDriverGetVersion(&driver);
  switch (p.error) {
    case cudaSuccess:
      return "no CUDA GPU was found (cudaGetDeviceCount returned 0)";
    case cudaErrorNoDevice:
      return "no CUDA GPU was found (cudaGetDeviceCount: no CUDA-capable device is detected)";
    case cudaErrorInsufficientDriver:
      if (driver <= 0) return "no NVIDIA driver is loaded on this machine (cudaErrorInsufficientDriver), so no GPU can be used";
      return "the NVIDIA driver is older than this build's CUDA toolkit: dpviz was built with CUDA " +
             version_str(CUDART_VERSION) + " but the driver supports CUDA " + version_str(driver) +
             "; update the driver (cudaErrorInsufficientDriver)";
    default:
      return std::string("the CUDA runtime could not start (cudaGetDeviceCount: ") + cudaGetErrorName(p.error) +
             ": " + cudaGetErrorString(p.error) + ")";
  }
}

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess || v <= 0) return "unknown";
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

void check_ordinal(int ordinal) {
  const int count = probe().count;
  if (count == 0) throw Error("CUDA is not available: " + no_gpu_reason() + "; use the device spec cpu:K for simulated devices");
  if (ordinal < 0 || ordinal >= count) {
    std::string have;
    for (int g = 0; g < count; ++g) have += (g ? ", " : "") + std::string("cuda:") + std::to_string(g);
    throw Error("cuda:" + std::to_string(ordinal) + " is not a GPU of this machine, which has " + std::to_string(count) +
                    " (" + have + ")",
                ErrorClass::ValueError);
  }
}

}  // namespace

bool cuda_entry::available() { return probe().count > 0; }

int cuda_entry::device_count() { return probe().count; }

std::string cuda_entry::device_name(int ordinal) {
  check_ordinal(ordinal);
  cudaDeviceProp prop{};
  DPV_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  return prop.name;
}

std::string cuda_entry::build_info() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  cudaGetLastError();
  std::string info = "CUDA " + version_str(CUDART_VERSION) + " (runtime " + version_str(runtime) + ", driver " +
                     (driver > 0 ? version_str(driver) : std::string("none")) + "), cuBLAS " +
                     std::to_string(CUBLAS_VER_MAJOR) + "." + std::to_string(CUBLAS_VER_MINOR) + "." +
                     std::to_string(CUBLAS_VER_PATCH) + ", NCCL " + nccl_version();
  if (probe().count == 0) info += "; " + no_gpu_reason();
  return info;
}

std::unique_ptr<Backend> cuda_entry::make_backend(int ordinal, int virtual_slot) {
  check_ordinal(ordinal);
  return std::make_unique<CudaBackend>(ordinal, virtual_slot);
}

}  // namespace dpv
