#pragma once
// Waiting for another thread in microseconds without burning an idle core: spin about 100 us
// (pausing, and yielding every 8th turn so a waiter that shares its core with the thread it waits
// for hands the core over), then park in std::atomic::wait (a futex) until notified.
// Used by the device threads' hand-off (HandoffPool) and the in-process ring's barrier.
//
// Spinning pays only while the machine has a free core for every spinner. When it has not (more
// runnable threads than cores: other processes, or more simulated devices than cores), a spinner
// takes a core from the thread it waits for, and a spinner that the scheduler preempts stays
// runnable instead of sleeping, so when its wake-up comes it queues behind the other processes for
// a whole scheduling period (milliseconds) instead of being woken at once as a sleeper is. So the
// spin watches for lost cores: a turn of the loop much longer than any interrupt (kLostCoreGap)
// means another thread ran on this core. Two of those close together and every waiter of the
// process parks at once for the next kParkAtOnceFor, after which one spin probes again.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <thread>

namespace dpv {

// How long a waiter spins before parking: longer than a futex wake-up of a parked thread takes on a
// cloud VM, where the woken virtual CPU was halted and the host must schedule it again (measured
// here: a DDP rank woken from a park joined the buffer broadcast 450 us late; at 20 us of spin
// that happened every step), so that back-to-back stages and a rank a little ahead of another
// find each other awake, while an idle thread costs nothing measurable.
inline constexpr auto kSpinBeforePark = std::chrono::microseconds(100);
// A turn of a spin this long means the spinner's core ran another thread: a preempted spinner
// waits for its next time slice, a millisecond or more. Shorter gaps (40-60 us, several times a
// second even on a quiet cloud VM) are interrupts or the hypervisor taking the virtual CPU for a
// moment: they end the spinner's own budget but say nothing about the machine's load.
inline constexpr auto kLostCoreGap = std::chrono::microseconds(250);
// Two lost cores this close together mean the machine is short of cores; a single one may still be
// a hiccup, and must not park every waiter.
inline constexpr auto kLostCoresWithin = std::chrono::milliseconds(10);
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
  // A spinner saw a gap of `gap` between two turns of its loop at `now`. Longer than its whole spin
  // budget: that spinner parks. Longer than kLostCoreGap: it lost its core to another thread, and
  // when that happened twice within kLostCoresWithin, every waiter parks at once for a while. A gap
  // while one of this process's own helper threads runs (HelperRunning) is a bounded burst of
  // known work, not a machine short of cores, and is not counted. Returns whether it may spin on.
  static bool note_turn(Clock::time_point now, Clock::duration gap) {
    if (gap <= kSpinBeforePark) return true;
    if (gap > kLostCoreGap && helpers_running_.load(std::memory_order_relaxed) == 0) {
      const Clock::rep previous = last_lost_.exchange(now.time_since_epoch().count(), std::memory_order_relaxed);
      if (now.time_since_epoch().count() - previous <= Clock::duration(kLostCoresWithin).count()) lost_core(now);
    }
    return false;
  }
  // Every waiter parks from `now` for kParkAtOnceFor.
  static void lost_core(Clock::time_point now) {
    park_until_.store((now + kParkAtOnceFor).time_since_epoch().count(), std::memory_order_relaxed);
  }
  // Held while a helper thread of this process runs a burst of work that waiters may wait for (the
  // in-process group's communication thread running an all-reduce): with as many ranks as cores it
  // takes a spinner's core for a while every step, which is not the machine running short of cores.
  class HelperRunning {
   public:
    HelperRunning() { helpers_running_.fetch_add(1, std::memory_order_relaxed); }
    ~HelperRunning() { helpers_running_.fetch_sub(1, std::memory_order_relaxed); }
    HelperRunning(const HelperRunning&) = delete;
    HelperRunning& operator=(const HelperRunning&) = delete;
  };
  // Back to the quiet-machine default (tests).
  static void reset() {
    park_until_.store(0, std::memory_order_relaxed);
    last_lost_.store(kLongAgo, std::memory_order_relaxed);
  }

 private:
  static inline std::atomic<Clock::rep> park_until_{0};
  static inline std::atomic<int> helpers_running_{0};
  static constexpr Clock::rep kLongAgo = std::numeric_limits<Clock::rep>::min() / 2;  // no lost core yet
  static inline std::atomic<Clock::rep> last_lost_{kLongAgo};
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
        if (!SpinPolicy::note_turn(t, t - last) || t >= give_up || !SpinPolicy::spinning_pays(t)) break;
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

// Waits until `value` differs from `old`, parked from the start (no spin): for a waiter that knows
// the wait is long against a wake-up, or whose spinning would take the core of the thread it waits for.
template <typename T>
T park_until_change(const std::atomic<T>& value, T old) {
  for (;;) {
    const T now = value.load(std::memory_order_acquire);
    if (now != old) return now;
    value.wait(old, std::memory_order_acquire);
  }
}

}  // namespace dpv
