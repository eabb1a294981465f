// The current GPU's multiprocessor count, read once per GPU, for the grid cap of common.cuh.
#include <atomic>

#include "kernels/common.cuh"

namespace dpv::kernels::detail {

int64_t max_grid_blocks() {
  constexpr int kMaxGpus = 64;
  static std::atomic<int> multiprocessors[kMaxGpus];  // 0: not read yet
  int device = 0;
  int sms = 0;
  if (cudaGetDevice(&device) == cudaSuccess && device >= 0 && device < kMaxGpus) {
    sms = multiprocessors[device].load(std::memory_order_relaxed);
    if (sms == 0 && cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess && sms > 0)
      multiprocessors[device].store(sms, std::memory_order_relaxed);
  }
  if (sms <= 0) {
    cudaGetLastError();  // the launch that follows reports the real problem
    sms = 1;
  }
  return static_cast<int64_t>(sms) * kBlocksPerSm;
}

}  // namespace dpv::kernels::detail
