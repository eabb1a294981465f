// The in-process group's communication thread (see ring_executor.h).
#include "engine/process_groups/ring_executor.h"

#include <chrono>

#include "engine/process_groups/in_process_group.h"
#include "engine/process_groups/ring_steps.h"
#include "engine/error.h"
#include "engine/spin_wait.h"

namespace dpv {

namespace {
using Clock = std::chrono::steady_clock;

constexpr uint32_t kRunning = 0, kDone = 1, kFailed = 2;

std::string aborted_message(const std::string& reason) { return "the in-process group was aborted: " + reason; }

// Ring step `step` of an all-reduce's 2(world-1): its phase (0 reduce-scatter, 1 all-gather) and its
// step within that phase.
struct PhaseStep {
  int phase;
  int step;
};
PhaseStep phase_step_of(int step, int world_size) {
  return step < world_size - 1 ? PhaseStep{0, step} : PhaseStep{1, step - (world_size - 1)};
}
}  // namespace

// One all-reduce, shared by the world ranks' Work handles.
struct RingExecutor::Job {
  explicit Job(int world_size)
      : bufs(static_cast<size_t>(world_size)),
        record(static_cast<size_t>(world_size), 0),
        reports(static_cast<size_t>(world_size)),
        steps(static_cast<size_t>(world_size)) {}
  std::vector<Tensor> bufs;   // per rank: its flat buffer
  std::vector<size_t> record;
  double premultiply = 1.0;   // the same on every rank
  int arrived = 0;            // ranks that started it (under the executor's mutex)

  // Set when it is taken from the queue (under the executor's mutex), read by every participant.
  // Part k is rank k % world's part of ring step k / world (the 2(world-1) steps of both phases in order).
  std::vector<int64_t> offsets;  // ring_chunk_offsets
  size_t element_size = 0;
  int parts = 0;                 // 2 (world - 1) world
  // Unrecorded, on host memory: the last reduce-scatter step also writes each finished chunk into
  // the successor's buffer (ring_receive_and_forward), and the first all-gather step moves nothing.
  bool forward_in_last_reduce = false;
  std::atomic<int> next_part{0};  // the next part a participant claims
  std::atomic<int> done_parts{0};
  // Per part, written by whoever ran it and read by the one that runs the last part.
  std::vector<Clock::time_point> part_begin, part_end;
  std::vector<std::vector<double>> part_before, part_after;
  std::mutex error_mutex;  // a failed part's message
  std::string part_error;

  // Written by the participant that finished it, before `state` leaves kRunning; read by waiters after.
  std::vector<CollectiveReport> reports;
  std::vector<std::vector<RingStep>> steps;
  Clock::time_point started{}, finished{};
  std::string error;
  ErrorReason error_reason = ErrorReason::Unspecified;  // GroupAborted when failed by an abort
  std::atomic<uint32_t> state{kRunning};

  void settle(uint32_t outcome) {
    state.store(outcome, std::memory_order_release);
    state.notify_all();
  }
};

namespace {

class RingWork final : public Work {
 public:
  RingWork(RingExecutor& executor, std::shared_ptr<RingExecutor::Job> job, int rank)
      : executor_(executor), job_(std::move(job)), rank_(static_cast<size_t>(rank)) {}
  void wait() override {
    if (job_->state.load(std::memory_order_acquire) == kRunning) executor_.wait_for(*job_);
    if (job_->state.load(std::memory_order_acquire) == kFailed) throw Error(job_->error, ErrorClass::RuntimeError, job_->error_reason);
  }
  bool completed() const override { return job_->state.load(std::memory_order_acquire) != kRunning; }
  const CollectiveReport& report() const override { return job_->reports[rank_]; }
  const std::vector<RingStep>& ring() const override { return job_->steps[rank_]; }
  Clock::time_point started() const override { return job_->started; }
  Clock::time_point finished() const override { return job_->finished; }

 private:
  RingExecutor& executor_;  // the group's; the ranks' Work handles are waited for before it goes
  std::shared_ptr<RingExecutor::Job> job_;
  size_t rank_;
};

}  // namespace

RingExecutor::RingExecutor(int world_size) : world_size_(world_size), next_seq_(static_cast<size_t>(world_size), 0) {}

RingExecutor::~RingExecutor() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    fail_pending(aborted_message("the group is being destroyed"));
  }
  wake_thread();
  if (thread_.joinable()) thread_.join();
}

void RingExecutor::wake_thread() {
  ready_.fetch_add(1, std::memory_order_seq_cst);
  ready_.notify_one();
}

void RingExecutor::wake_waiters() {
  progress_.fetch_add(1, std::memory_order_seq_cst);
  progress_.notify_all();
}

void RingExecutor::wait_for(const Job& job) {
  // Registered before looking, so that an all-reduce completed meanwhile wakes this rank (start()
  // reads the count after the job is complete; seq_cst on both sides).
  waiting_ranks_.fetch_add(1, std::memory_order_seq_cst);
  for (;;) {
    const uint32_t seen = progress_.load(std::memory_order_seq_cst);
    if (job.state.load(std::memory_order_acquire) != kRunning) break;
    // Run its parts (or an earlier all-reduce's) here. Otherwise park at once rather than spin: the
    // parts left run on threads that, with more threads than cores, need this one's core.
    if (run_next_ready(false)) continue;
    park_until_change(progress_, seen);
  }
  waiting_ranks_.fetch_sub(1, std::memory_order_seq_cst);
}

void RingExecutor::fail_pending(const std::string& message) {
  for (auto& job : pending_) {
    job->error = message;
    job->error_reason = ErrorReason::GroupAborted;
    job->bufs.clear();
    job->settle(kFailed);
  }
  first_seq_ += pending_.size();
  pending_.clear();
  wake_waiters();
}

void RingExecutor::abort(const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (!aborted_) abort_reason_ = reason;
  aborted_ = true;
  fail_pending(aborted_message(abort_reason_));
}

std::shared_ptr<Work> RingExecutor::start(int rank, const Tensor& buf, size_t record_values, double premultiply) {
  check(rank >= 0 && rank < world_size_, "RingExecutor: no rank " + std::to_string(rank));
  std::shared_ptr<Job> job;
  bool complete = false;
  {
    std::lock_guard lock(mutex_);
    if (aborted_ || stopping_)
      throw Error(aborted_message(aborted_ ? abort_reason_ : "the group is being destroyed"), ErrorClass::RuntimeError,
                  ErrorReason::GroupAborted);
    const uint64_t seq = next_seq_[static_cast<size_t>(rank)]++;
    const size_t index = static_cast<size_t>(seq - first_seq_);
    while (pending_.size() <= index) pending_.push_back(std::make_shared<Job>(world_size_));
    job = pending_[index];
    job->bufs[static_cast<size_t>(rank)] = buf.reshape({buf.numel()});
    job->record[static_cast<size_t>(rank)] = record_values;
    if (premultiply != 1.0) job->premultiply = premultiply;
    complete = ++job->arrived == world_size_;
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  // Ranks already waiting run it themselves (and the thread leaves it to them); otherwise the
  // thread runs it while the ranks go on with their backward.
  if (complete) {
    if (waiting_ranks_.load(std::memory_order_seq_cst) > 0)
      wake_waiters();
    else
      wake_thread();
  }
  return std::make_shared<RingWork>(*this, job, rank);
}

bool RingExecutor::run_next_ready(bool communication_thread) {
  std::shared_ptr<Job> job;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    // With ranks waiting, they run the ring; the thread would only take a core from one of them.
    if (communication_thread && waiting_ranks_.load(std::memory_order_seq_cst) > 0) return false;
    if (active_) {
      // Join the running all-reduce while it has parts left to claim.
      if (active_->next_part.load(std::memory_order_relaxed) >= active_->parts) return false;
      job = active_;
    } else {
      // In start order: the front is taken once every rank started it.
      if (pending_.empty() || pending_.front()->arrived != world_size_) return false;
      job = std::move(pending_.front());
      pending_.pop_front();
      ++first_seq_;
      if (!prepare(*job)) {  // settled as failed (or had nothing to move)
        wake_waiters();
        return true;
      }
      active_ = job;
    }
  }
  const SpinPolicy::HelperRunning helper;  // a rank spinning at a stage's end meanwhile is not short of cores
  run_parts(*job);
  return true;
}

bool RingExecutor::prepare(Job& job) {
  const int world = world_size_;
  const Tensor& first = job.bufs[0];
  for (int r = 1; r < world; ++r) {
    const Tensor& b = job.bufs[static_cast<size_t>(r)];
    if (b.numel() != first.numel() || b.dtype() != first.dtype()) {
      job.error = "all_reduce: rank " + std::to_string(r) + " brought " + std::to_string(b.numel()) + " " +
                  dtype_name(b.dtype()) + " elements but rank 0 brought " + std::to_string(first.numel()) + " " +
                  dtype_name(first.dtype()) + "; every rank must call the same collectives with the same sizes";
      job.bufs.clear();
      job.settle(kFailed);
      return false;
    }
  }
  // Recorded steps show the premultiplied values from the first step on, as after a separate pass:
  // then (and on one rank, where nothing moves) make that pass here.
  bool recorded = false;
  for (size_t keep : job.record) recorded = recorded || keep > 0;
  if (job.premultiply != 1.0 && (recorded || world == 1)) {
    for (Tensor& b : job.bufs) premultiply_in_place(b, job.premultiply);
    job.premultiply = 1.0;
  }
  bool on_host = true;
  for (const Tensor& b : job.bufs) on_host = on_host && b.on_host_memory();
  job.forward_in_last_reduce = !recorded && on_host && world >= 2;
  job.offsets = ring_chunk_offsets(first.numel(), world);
  job.element_size = dtype_size(first.dtype());
  job.parts = 2 * (world - 1) * world;
  const size_t parts = static_cast<size_t>(job.parts);
  job.part_begin.assign(parts, {});
  job.part_end.assign(parts, {});
  job.part_before.assign(parts, {});
  job.part_after.assign(parts, {});
  job.started = Clock::now();
  if (job.parts == 0) {  // one rank: nothing moves
    finish(job);
    return false;
  }
  return true;
}

void RingExecutor::run_parts(Job& job) {
  const int world = world_size_;
  for (;;) {
    const int part = job.next_part.fetch_add(1, std::memory_order_relaxed);
    if (part >= job.parts) return;
    const int step = part / world, rank = part % world;
    // Step s reads chunks that step s-1 wrote: wait until every part of the earlier steps is done.
    for (int done = job.done_parts.load(std::memory_order_acquire); done < step * world;)
      done = wait_for_change(job.done_parts, done);
    const size_t k = static_cast<size_t>(part);
    try {
      const auto [phase, phase_step] = phase_step_of(step, world);
      Tensor& mine = job.bufs[static_cast<size_t>(rank)];
      const size_t keep = job.record[static_cast<size_t>(rank)];
      if (keep > 0) job.part_before[k] = mine.to_doubles(keep);
      job.part_begin[k] = Clock::now();
      const Tensor& from = job.bufs[static_cast<size_t>((rank + world - 1) % world)];
      const int recv_chunk = ring_move(phase, rank, phase_step, world).recv_chunk;
      // With forward_in_last_reduce the first all-gather step's chunk arrived with the step before.
      const bool already_moved = job.forward_in_last_reduce && step == world - 1;
      if (job.forward_in_last_reduce && step == world - 2)
        ring_receive_and_forward(phase_step, mine, from, job.bufs[static_cast<size_t>((rank + 1) % world)], recv_chunk,
                                 job.offsets, job.premultiply);
      else if (phase == 0 && job.premultiply != 1.0)
        ring_receive_premultiplied(phase_step, mine, from, recv_chunk, job.offsets, job.premultiply);
      else if (!already_moved)
        ring_receive(phase, mine, from, recv_chunk, job.offsets);
      job.part_end[k] = Clock::now();
      if (keep > 0) job.part_after[k] = mine.to_doubles(keep);
    } catch (const std::exception& e) {
      std::lock_guard lock(job.error_mutex);
      if (job.part_error.empty()) job.part_error = e.what();
    }
    const int done = job.done_parts.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (done % world == 0) job.done_parts.notify_all();  // a step is complete: release its successors
    if (done == job.parts) {
      {
        std::lock_guard lock(mutex_);
        active_ = nullptr;
      }
      finish(job);
      wake_waiters();
      // The next all-reduce may have been complete for a while, waiting for this one to end.
      bool next_ready = false;
      {
        std::lock_guard lock(mutex_);
        next_ready = !pending_.empty() && pending_.front()->arrived == world_size_;
      }
      if (next_ready && waiting_ranks_.load(std::memory_order_seq_cst) == 0) wake_thread();
      return;
    }
  }
}

void RingExecutor::finish(Job& job) {
  const int world = world_size_;
  job.finished = Clock::now();
  if (!job.part_error.empty()) {
    job.error = job.part_error;
    job.bufs.clear();
    job.settle(kFailed);
    return;
  }
  for (auto& s : job.steps) s.clear();
  // Each step's time is its wall time over all ranks' parts (what a barrier would have released every rank at).
  for (int step = 0; step < 2 * (world - 1); ++step) {
    const size_t first = static_cast<size_t>(step * world);
    Clock::time_point begin = job.part_begin[first], end = job.part_end[first];
    for (size_t k = first; k < first + static_cast<size_t>(world); ++k) {
      begin = std::min(begin, job.part_begin[k]);
      end = std::max(end, job.part_end[k]);
    }
    const double seconds = std::chrono::duration<double>(end - begin).count();
    const auto [phase, phase_step] = phase_step_of(step, world);
    for (int r = 0; r < world; ++r) {
      const auto [send, recv] = ring_move(phase, r, phase_step, world);
      const size_t k = first + static_cast<size_t>(r);
      const size_t bytes = static_cast<size_t>(job.offsets[static_cast<size_t>(send) + 1] -
                                               job.offsets[static_cast<size_t>(send)]) * job.element_size;
      job.steps[static_cast<size_t>(r)].push_back({phase == 0 ? "reduce-scatter" : "all-gather", phase_step,
                                                   (r + 1) % world, (r + world - 1) % world, send, recv, bytes, seconds,
                                                   std::move(job.part_before[k]), std::move(job.part_after[k])});
    }
  }
  const double seconds = std::chrono::duration<double>(job.finished - job.started).count();
  for (auto& report : job.reports) {
    report = {CollectiveOp::AllReduce, world, job.bufs[0].nbytes()};
    report.seconds = seconds;
    finish_report(report);
  }
  job.bufs.clear();  // the Work handles outlive the all-reduce; the ranks' buffers are theirs again
  job.settle(kDone);
}

void RingExecutor::loop() {
  for (;;) {
    // Read the counter before looking, so a job completed after the look still wakes this thread.
    const uint32_t seen = ready_.load(std::memory_order_acquire);
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    // Parked, not spinning, between all-reduces: it would spin on a core the ranks' backward needs.
    if (!run_next_ready(true)) park_until_change(ready_, seen);
  }
}

}  // namespace dpv
