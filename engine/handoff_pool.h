#pragma once
// The threads that run a device set's per-device work ("device d's thread", as parallel_apply
// starts one thread per replica). A hand-off must cost microseconds, not a scheduler round trip:
//  - job 0 runs on the calling thread, so K devices need only K-1 pool threads;
//  - every needed worker is woken before the caller starts job 0 (one store + one futex wake each,
//    no mutex, no queue);
//  - a worker spins about 20 us for its next job before parking in std::atomic::wait, and the
//    caller spins as long for the workers' shared completion counter before parking
//    (engine/spin_wait.h): back-to-back stages never reach the scheduler, and an idle pool burns
//    no core.
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
  // The jobs must not throw (the caller wraps them to collect exceptions).
  void run(int count, const std::function<void(int)>& job);
  // Runs job(0), job(1), ... in the calling thread: for work smaller than a hand-off.
  static void run_inline(int count, const std::function<void(int)>& job);

 private:
  struct alignas(64) Slot {
    std::atomic<uint32_t> sequence{0};  // bumped by the caller: "your job is ready"
  };
  void loop(int worker);

  std::vector<std::unique_ptr<Slot>> slots_;   // slot w wakes pool thread w (job w + 1)
  alignas(64) std::atomic<int> pending_{0};    // pool jobs of this run not yet finished
  const std::function<void(int)>* job_ = nullptr;  // written before a slot's bump, read after it
  std::atomic<bool> stop_{false};
  std::mutex run_mutex_;  // one run at a time (callers on different threads take turns)
  std::vector<std::thread> threads_;
};

}  // namespace dpv
