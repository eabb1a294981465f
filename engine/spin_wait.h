#pragma once
// Waiting for another thread in microseconds without burning an idle core: spin about 20 us
// (pausing, and yielding every 8th turn so a waiter that shares its core with the thread it waits
// for hands the core over), then park in std::atomic::wait (a futex) until notified.
// Used by the device threads' hand-off (HandoffPool) and the in-process ring's barrier.
//
// Spinning pays only while the machine has a free core for every spinner. When it has not (more
// runnable threads than cores: other processes, or more simulated devices than cores), a spinner
// takes a core from the thread it waits for, and a spinner that the scheduler preempts stays
// runnable instead of sleeping, so when its wake-up comes it queues behind the other processes for
// a whole scheduling period (milliseconds) instead of being woken at once as a sleeper is. So the
// spin watches for lost cores: a turn of the loop that took longer than the whole spin budget
// means another thread ran on this core. Then every waiter of the process parks at once for the
// next kParkAtOnceFor, after which one spin probes again.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace dpv {

// How long a waiter spins before parking: a few times a futex wake-up on an idle core, so that
// back-to-back stages find their threads awake, while an idle thread costs nothing measurable.
inline constexpr auto kSpinBeforePark = std::chrono::microseconds(20);
// How long waiters park at once after a spinner lost its core: long against a step (so the probe's
// cost, at most one preempted spin, is rare), short against a person watching the load change.
inline constexpr auto kParkAtOnceFor = std::chrono::milliseconds(500);

// The process-wide decision "spinning pays now". Lock-free, shared by every waiter.
class SpinPolicy {
 public:
  using Clock = std::chrono::steady_clock;
  // Whether a waiter starting to wait at `now` may spin.
  static bool spinning_pays(Clock::time_point now) {
    return now.time_since_epoch().count() >= park_until_.load(std::memory_order_relaxed);
  }
  // A spinner saw a gap of `gap` between two turns of its loop at `now`: longer than the whole spin
  // budget means it lost its core to another thread, and waiters park at once for a while.
  static void note_turn(Clock::time_point now, Clock::duration gap) {
    if (gap > kSpinBeforePark) lost_core(now);
  }
  static void lost_core(Clock::time_point now) {
    park_until_.store((now + kParkAtOnceFor).time_since_epoch().count(), std::memory_order_relaxed);
  }
  // Back to the quiet-machine default (tests).
  static void reset() { park_until_.store(0, std::memory_order_relaxed); }

 private:
  static inline std::atomic<Clock::rep> park_until_{0};
};

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
  auto last = SpinPolicy::Clock::now();
  if (SpinPolicy::spinning_pays(last)) {
    const auto give_up = last + kSpinBeforePark;
    for (int i = 1;; ++i) {
      if (i % 8 == 0)
        std::this_thread::yield();
      else
        cpu_relax();
      now = value.load(std::memory_order_acquire);
      if (now != old) return now;
      if (i % 8 == 0) {
        const auto t = SpinPolicy::Clock::now();
        SpinPolicy::note_turn(t, t - last);
        if (t >= give_up || !SpinPolicy::spinning_pays(t)) break;
        last = t;
      }
    }
  }
  for (;;) {
    value.wait(old, std::memory_order_acquire);
    now = value.load(std::memory_order_acquire);
    if (now != old) return now;
  }
}

}  // namespace dpv
