#pragma once
// One macro checks every CUDA runtime, cuBLAS, NCCL and kernel-launcher call of the backend:
//   DPV_CUDA_CHECK(cudaMemcpyAsync(...));
// On failure it throws dpv::Error("<call> failed: <error string> at <file>:<line>"), never aborts.
// Private to engine/cuda (the engine's public headers hold no CUDA types).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "engine/error.h"

namespace dpv::cuda_detail {

[[noreturn]] void throw_cuda_error(const char* call, const std::string& what, const char* file, int line,
                                   ErrorClass kind = ErrorClass::RuntimeError,
                                   ErrorReason reason = ErrorReason::Unspecified);

const char* cublas_status_string(cublasStatus_t status);
// "NCCL: unhandled system error (Connection refused on ...)": the status's string, then what
// ncclGetLastError says of the last failure (which peer, which socket), when it says anything.
std::string nccl_error_text(ncclResult_t status);

inline void check(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clears a non-sticky error so the next call does not report it again
  if (status == cudaErrorMemoryAllocation)
    throw_cuda_error(call, std::string("CUDA out of memory (") + cudaGetErrorString(status) + ")", file, line,
                     ErrorClass::OutOfMemoryError, ErrorReason::OutOfMemory);
  throw_cuda_error(call, std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status), file, line);
}
inline void check(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_cuda_error(call, cublas_status_string(status), file, line);
}
inline void check(ncclResult_t status, const char* call, const char* file, int line) {
  if (status != ncclSuccess) throw_cuda_error(call, nccl_error_text(status), file, line);
}
// Kernel launchers (kernels/*.h) return the cudaError_t of the launch as an int.
inline void check(int status, const char* call, const char* file, int line) {
  check(static_cast<cudaError_t>(status), call, file, line);
}

}  // namespace dpv::cuda_detail

#define DPV_CUDA_CHECK(call) ::dpv::cuda_detail::check((call), #call, __FILE__, __LINE__)
