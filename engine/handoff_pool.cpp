#include "engine/handoff_pool.h"

#include "engine/spin_wait.h"

namespace dpv {

namespace {

// Set while a thread runs a job of a pool: a run started from inside a job runs inline.
thread_local const HandoffPool* running_in = nullptr;

struct RunningIn {
  explicit RunningIn(const HandoffPool* pool) : previous(running_in) { running_in = pool; }
  ~RunningIn() { running_in = previous; }
  const HandoffPool* previous;
};

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
