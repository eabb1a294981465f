#pragma once
// Waiting for another thread in microseconds without burning an idle core: spin about 20 us
// (pausing, and yielding every 8th turn so a waiter that shares its core with the thread it waits
// for hands the core over), then park in std::atomic::wait (a futex) until notified.
// Used by the device threads' hand-off (HandoffPool) and the in-process ring's barrier.
#include <atomic>
#include <chrono>
#include <thread>

namespace dpv {

// How long a waiter spins before parking: a few times a futex wake-up on an idle core, so that
// back-to-back stages find their threads awake, while an idle thread costs nothing measurable.
inline constexpr auto kSpinBeforePark = std::chrono::microseconds(20);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Waits until `value` differs from `old` and returns the new value. The writer must call
// notify_one/notify_all after changing it.
template <typename T>
T wait_for_change(const std::atomic<T>& value, T old) {
  T now = value.load(std::memory_order_acquire);
  if (now != old) return now;
  const auto give_up = std::chrono::steady_clock::now() + kSpinBeforePark;
  for (int i = 1;; ++i) {
    if (i % 8 == 0)
      std::this_thread::yield();
    else
      cpu_relax();
    now = value.load(std::memory_order_acquire);
    if (now != old) return now;
    if (i % 8 == 0 && std::chrono::steady_clock::now() >= give_up) break;
  }
  for (;;) {
    value.wait(old, std::memory_order_acquire);
    now = value.load(std::memory_order_acquire);
    if (now != old) return now;
  }
}

}  // namespace dpv
