#pragma once
// A gate queued on CUDA streams so that a collective's timed span holds the GPU work only, not the
// host's launch gaps: the host closes the gate, queues a host function that waits for it on every
// rank's stream, records each start event behind it, queues the whole collective (NCCL group or
// peer copies and sums, many launches), records the stop events, then opens the gate. The start
// events fire when every launch is already queued. The wait is bounded (kLongestHold): a gate left
// closed by a bug delays the stream, it never hangs it. Open is also called by the destructor, so a
// throw while queuing opens it at once.
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>

namespace dpv {

class LaunchGate {
 public:
  static constexpr auto kLongestHold = std::chrono::seconds(2);

  LaunchGate() = default;
  ~LaunchGate() { open(); }
  LaunchGate(const LaunchGate&) = delete;
  LaunchGate& operator=(const LaunchGate&) = delete;

  // Closes the gate (before the first hold of a collective).
  void close() { open_.store(false, std::memory_order_release); }
  // Queues the wait on `stream`: work queued after it starts once the gate opens.
  cudaError_t hold(cudaStream_t stream) { return cudaLaunchHostFunc(stream, &LaunchGate::wait, this); }
  void open() { open_.store(true, std::memory_order_release); }

 private:
  // Runs on the CUDA driver's callback thread: no CUDA calls here, only the bounded wait.
  static void CUDART_CB wait(void* self);
  std::atomic<bool> open_{true};
};

}  // namespace dpv
