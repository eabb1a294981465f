#pragma once
// The threads that run a device set's per-device work ("device d's thread", as parallel_apply
// starts one thread per replica). A hand-off must cost microseconds, not a scheduler round trip:
//  - job 0 runs on the calling thread, so K devices need only K-1 pool threads;
//  - every needed worker is woken before the caller starts job 0 (one store + one futex wake each,
//    no mutex, no queue);
//  - a worker spins about 100 us for its next job before parking in std::atomic::wait, and the
//    caller spins as long for the workers' shared completion counter before parking
//    (engine/spin_wait.h): back-to-back stages never reach the scheduler, and an idle pool burns
//    no core;
//  - jobs that never wait for one another may be stolen: once the caller has run job 0 it claims
//    and runs, one after another, every job whose thread has not started it yet (one atomic claim
//    per job; a thread that wakes to a claimed job goes back to waiting). So a run never waits for
//    a wake-up that the scheduler delays when the machine has fewer free cores than threads; it
//    waits only for jobs that are already running.
// One run at a time; a run started from inside a job (nested) runs its jobs inline, one after
// another, instead of waiting for itself.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace dpv {

class HandoffPool {
 public:
  // `threads` pool threads run jobs 1..threads; job 0 always runs on the caller.
  explicit HandoffPool(int threads);
  ~HandoffPool();
  HandoffPool(const HandoffPool&) = delete;
  HandoffPool& operator=(const HandoffPool&) = delete;

  int threads() const { return static_cast<int>(slots_.size()); }
  // Runs job(i) for i in [0, count) and returns when every job has returned. count <= threads() + 1.
  // The jobs must not throw (the caller wraps them to collect exceptions). caller_may_steal: the
  // jobs never wait for one another and may run on any thread (no thread affinity, no per-thread
  // state), so the caller runs the ones its threads have not started; otherwise job i always runs
  // on pool thread i (jobs that meet in a barrier, a CUDA device's jobs on its own thread).
  // max_threads (stealable runs only; 0: no limit): at most this many threads run the jobs, the
  // caller included, each taking the next job left (FreeCores: never more busy threads than free
  // cores, since a job whose thread the scheduler sets aside delays the whole stage).
  void run(int count, const std::function<void(int)>& job, bool caller_may_steal = false, int max_threads = 0);
  // Runs job(0), job(1), ... in the calling thread: for work smaller than a hand-off.
  static void run_inline(int count, const std::function<void(int)>& job);

 private:
  // A slot's state is 2 * run + claimed: the caller stores 2 * run when the slot's job of that run is
  // ready ("open"), and whoever runs it (the slot's pool thread, or the caller stealing it) first
  // claims it by a compare-exchange to 2 * run + 1. Runs count up, so an old value never matches.
  struct alignas(64) Slot {
    std::atomic<uint32_t> state{0};
  };
  static bool claim(Slot& slot, uint32_t open);
  void finish_pool_job();
  void loop(int worker);

  std::vector<std::unique_ptr<Slot>> slots_;   // slot w holds job w + 1, run by pool thread w unless stolen
  alignas(64) std::atomic<int> pending_{0};    // jobs 1.. of this run not yet finished
  uint32_t run_ = 0;                           // the current run's number (under run_mutex_)
  const std::function<void(int)>* job_ = nullptr;  // written before a slot's bump, read after it
  std::atomic<bool> stop_{false};
  std::mutex run_mutex_;  // one run at a time (callers on different threads take turns)
  std::vector<std::thread> threads_;
};

}  // namespace dpv
