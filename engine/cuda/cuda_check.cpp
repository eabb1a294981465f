#include "engine/cuda/cuda_check.h"

#include "engine/error.h"

namespace dpv::cuda_detail {

void throw_cuda_error(const char* call, const std::string& what, const char* file, int line, ErrorClass kind,
                      ErrorReason reason) {
  // Only the file's name: the build machine's folders mean nothing to the reader.
  std::string where = file;
  if (const auto slash = where.find_last_of('/'); slash != std::string::npos) where = where.substr(slash + 1);
  throw Error(std::string(call) + " failed: " + what + " at " + where + ":" + std::to_string(line), kind, reason);
}

std::string nccl_error_text(ncclResult_t status) {
  std::string text = std::string("NCCL: ") + ncclGetErrorString(status);
  // NULL: the last error of this thread's NCCL calls, whichever communicator made it.
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0') text += std::string(" (") + last + ")";
  return text;
}

const char* cublas_status_string(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED (cuBLAS could not start: no usable GPU?)";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED (out of GPU memory for cuBLAS)";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE (a size or leading dimension is invalid)";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH (the GPU lacks a needed feature)";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED (the GPU kernel failed to run)";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

}  // namespace dpv::cuda_detail
