#include "engine/handoff_pool.h"

#include <chrono>

namespace dpv {

namespace {

// How long a thread spins for the value it waits for before parking. A few times the cost of a
// futex wake-up on an idle core: long enough that the next stage of a running iteration finds its
// workers awake, short enough that an idle pool costs nothing measurable.
constexpr auto kSpin = std::chrono::microseconds(20);

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Set while a thread runs a job of a pool: a run started from inside a job runs inline.
thread_local const HandoffPool* running_in = nullptr;

struct RunningIn {
  explicit RunningIn(const HandoffPool* pool) : previous(running_in) { running_in = pool; }
  ~RunningIn() { running_in = previous; }
  const HandoffPool* previous;
};

// Waits until `value` differs from `old`: spins for kSpin, then parks. Returns the new value.
template <typename T>
T wait_for_change(const std::atomic<T>& value, T old) {
  T now = value.load(std::memory_order_acquire);
  if (now != old) return now;
  const auto give_up = std::chrono::steady_clock::now() + kSpin;
  for (int i = 1;; ++i) {
    if (i % 8 == 0) std::this_thread::yield(); else cpu_relax();
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

}  // namespace

HandoffPool::HandoffPool(int threads) {
  for (int w = 0; w < threads; ++w) slots_.push_back(std::make_unique<Slot>());
  threads_.reserve(static_cast<size_t>(threads));
  for (int w = 0; w < threads; ++w) threads_.emplace_back([this, w] { loop(w); });
}

HandoffPool::~HandoffPool() {
  stop_.store(true, std::memory_order_release);
  for (auto& slot : slots_) {
    slot->sequence.fetch_add(1, std::memory_order_release);
    slot->sequence.notify_one();
  }
  for (auto& t : threads_) t.join();
}

void HandoffPool::run_inline(int count, const std::function<void(int)>& job) {
  for (int i = 0; i < count; ++i) job(i);
}

void HandoffPool::run(int count, const std::function<void(int)>& job) {
  if (count <= 1 || running_in == this) {
    run_inline(count, job);
    return;
  }
  std::lock_guard lock(run_mutex_);
  job_ = &job;
  pending_.store(count - 1, std::memory_order_relaxed);
  // Wake every worker first (each bump publishes job_ and pending_ to its worker), then work.
  for (int w = 0; w < count - 1; ++w) {
    slots_[static_cast<size_t>(w)]->sequence.fetch_add(1, std::memory_order_release);
    slots_[static_cast<size_t>(w)]->sequence.notify_one();
  }
  {
    RunningIn mark(this);
    job(0);
  }
  for (int left = pending_.load(std::memory_order_acquire); left != 0;) left = wait_for_change(pending_, left);
  job_ = nullptr;
}

void HandoffPool::loop(int worker) {
  Slot& slot = *slots_[static_cast<size_t>(worker)];
  RunningIn mark(this);
  uint32_t seen = 0;
  for (;;) {
    seen = wait_for_change(slot.sequence, seen);
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(worker + 1);
    // The last worker to finish wakes the caller (a no-op when it is still spinning).
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace dpv
