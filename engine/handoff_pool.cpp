#include "engine/handoff_pool.h"

#include <algorithm>

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
  // A new set of device threads spins afresh: lost cores seen before it were mostly those of an
  // earlier set (four simulated devices on two cores park every waiter for kParkAtOnceFor), and
  // parking this set's first half second for them made a cpu:2 DataParallel run right after a
  // cpu:4 one as slow as one device. A machine that really is short of cores costs one probe.
  SpinPolicy::reset();
  for (int w = 0; w < threads; ++w) slots_.push_back(std::make_unique<Slot>());
  threads_.reserve(static_cast<size_t>(threads));
  for (int w = 0; w < threads; ++w) threads_.emplace_back([this, w] { loop(w); });
}

HandoffPool::~HandoffPool() {
  stop_.store(true, std::memory_order_release);
  for (auto& slot : slots_) {
    slot->state.fetch_add(2, std::memory_order_release);  // a change every thread wakes to
    slot->state.notify_one();
  }
  for (auto& t : threads_) t.join();
}

void HandoffPool::run_inline(int count, const std::function<void(int)>& job) {
  for (int i = 0; i < count; ++i) job(i);
}

bool HandoffPool::claim(Slot& slot, uint32_t open) {
  // Acquire: the claimant sees job_ and pending_ as the caller published them with the open state.
  return slot.state.compare_exchange_strong(open, open | 1u, std::memory_order_acq_rel, std::memory_order_acquire);
}

void HandoffPool::finish_pool_job() {
  // The last job to finish wakes the caller (a no-op when it is still spinning, or is the caller).
  if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
}

void HandoffPool::run(int count, const std::function<void(int)>& job, bool caller_may_steal, int max_threads) {
  if (count <= 1 || running_in == this) {
    run_inline(count, job);
    return;
  }
  if (caller_may_steal && max_threads > 0 && max_threads < count) {
    // Fewer threads than jobs: each of the max_threads takes the next job not yet taken until none
    // is left, so the work spreads evenly whichever thread the scheduler runs first.
    std::atomic<int> next{0};
    const std::function<void(int)> take_jobs = [&](int) {
      for (int i = next.fetch_add(1, std::memory_order_relaxed); i < count; i = next.fetch_add(1, std::memory_order_relaxed))
        job(i);
    };
    run(max_threads, take_jobs, true);
    return;
  }
  std::lock_guard lock(run_mutex_);
  job_ = &job;
  pending_.store(count - 1, std::memory_order_relaxed);
  const uint32_t open = 2u * ++run_;
  // Open every job first (each store publishes job_ and pending_ to its claimant), then work.
  for (int w = 0; w < count - 1; ++w) {
    Slot& slot = *slots_[static_cast<size_t>(w)];
    slot.state.store(open, std::memory_order_release);
    slot.state.notify_one();
  }
  {
    RunningIn mark(this);
    job(0);
    // The threads woken last are the likeliest not to have started yet: steal from the end.
    if (caller_may_steal)
      for (int w = count - 2; w >= 0; --w)
        if (claim(*slots_[static_cast<size_t>(w)], open)) {
          job(w + 1);
          finish_pool_job();
        }
  }
  for (int left = pending_.load(std::memory_order_acquire); left != 0;) left = wait_for_change(pending_, left);
  job_ = nullptr;
}

void HandoffPool::loop(int worker) {
  Slot& slot = *slots_[static_cast<size_t>(worker)];
  RunningIn mark(this);
  uint32_t seen = 0;
  for (;;) {
    seen = wait_for_change(slot.state, seen);
    if (stop_.load(std::memory_order_acquire)) return;
    // An open job is this thread's to claim; a claimed one was stolen (or is an old run's): wait on.
    while ((seen & 1u) == 0) {
      if (claim(slot, seen)) {
        (*job_)(worker + 1);
        finish_pool_job();
        seen |= 1u;
        break;
      }
      seen = slot.state.load(std::memory_order_acquire);
    }
  }
}

}  // namespace dpv
