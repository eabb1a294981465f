#include "engine/cuda/launch_gate.h"

#include <thread>

namespace dpv {

void CUDART_CB LaunchGate::wait(void* self) {
  const auto& gate = *static_cast<const LaunchGate*>(self);
  const auto give_up = std::chrono::steady_clock::now() + kLongestHold;
  // The host queues a collective in microseconds to milliseconds: spin with yields, bounded.
  while (!gate.open_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::yield();
}

}  // namespace dpv
