#pragma once
// The in-process group's communication thread for started all-reduces
// (ProcessGroup::start_all_reduce_sum). Each rank starts its n-th all-reduce and goes on with its
// own work; when the last of the world ranks has started it, the thread runs that all-reduce's whole
// ring: step by step, every rank's part of step s (ring_steps.h) before step s+1, so the chunks,
// partial sums, bytes and the order of the additions are exactly the ring's, and the sums are
// bit-identical to world threads meeting at 2 world - 1 barriers. Ranks that wait for an all-reduce join in:
// the thread and the waiters claim the ranks' parts of each step, which touch different memory, and
// run them at once. What it saves: world threads that must all be awake at once for every step (on a
// machine with fewer cores than ranks, each barrier could wait for a scheduler tick), world
// communication threads, and a queue hop per bucket per rank. Each step's reported time is the
// step's wall time over all ranks' parts (what a barrier would have released every rank at).
// Unless values are recorded, the last reduce-scatter step also hands each finished chunk to the
// successor (ring_receive_and_forward: the first all-gather step fused into it, as NCCL pipelines
// its steps); the first all-gather step still reports its bytes, with no time of its own.
// All-reduces run in the order they were started, one at a time.
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/process_groups/process_group.h"

namespace dpv {

class RingExecutor {
 public:
  struct Job;
  explicit RingExecutor(int world_size);
  ~RingExecutor();  // pending all-reduces fail (their waiters throw); the running one finishes first
  RingExecutor(const RingExecutor&) = delete;
  RingExecutor& operator=(const RingExecutor&) = delete;

  // Rank `rank` starts its next all-reduce of `buf` (flat view taken here). `record_values`: as
  // record_ring_values (elements of the buffer kept before and after each step; 0 = none).
  // Throws once aborted.
  // `premultiply`: as ProcessGroup::start_all_reduce_sum (the same for every rank).
  std::shared_ptr<Work> start(int rank, const Tensor& buf, size_t record_values, double premultiply = 1.0);  // the Work must not outlive this
  // Every all-reduce not yet running fails with "the in-process group was aborted: <reason>", and
  // so does every later start.
  void abort(const std::string& reason);
  // Works on the running all-reduce (claiming its ranks' parts of each step), or takes the next one
  // once every rank has started it; false when there was nothing to do. The ranks' parts of one
  // step touch different memory, so waiting ranks and the thread run them at once. The thread
  // (communication_thread) leaves the work to the ranks while any is waiting: on a machine with no
  // more cores than ranks it would only take a core from one of them.
  bool run_next_ready(bool communication_thread);
  // A rank waits until `job` is settled, running parts of it (and of earlier all-reduces) meanwhile.
  void wait_for(const Job& job);


 private:
  void loop();
  bool prepare(Job& job);  // under mutex_; false when it failed (or had nothing to move) and is settled
  void run_parts(Job& job);
  void finish(Job& job);   // once every part is done: steps, reports, settle
  void wake_thread();      // the communication thread looks for work
  void wake_waiters();     // waiting ranks look again (an all-reduce completed, started or failed)
  void fail_pending(const std::string& message);  // under mutex_

  const int world_size_;
  std::mutex mutex_;                           // guards everything below but ready_
  std::deque<std::shared_ptr<Job>> pending_;   // started by some rank, not yet taken
  std::shared_ptr<Job> active_;                // taken and running (participants may join it)
  uint64_t first_seq_ = 0;                     // the all-reduce number of pending_.front()
  std::vector<uint64_t> next_seq_;             // per rank: the number of its next start
  bool stopping_ = false;
  bool aborted_ = false;
  std::string abort_reason_;
  std::thread thread_;                         // started with the first all-reduce
  alignas(64) std::atomic<uint32_t> ready_{0};  // the thread's wake-ups: an all-reduce has all world ranks
  alignas(64) std::atomic<uint32_t> progress_{0};  // the waiting ranks' wake-ups
  std::atomic<int> waiting_ranks_{0};              // ranks inside wait_for
};

}  // namespace dpv
