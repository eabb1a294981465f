// The in-process group's communication thread (see ring_executor.h).
#include "engine/dist/ring_executor.h"

#include <chrono>

#include "engine/dist/in_process_group.h"
#include "engine/dist/ring_steps.h"
#include "engine/error.h"
#include "engine/spin_wait.h"

namespace dpv {

namespace {
using Clock = std::chrono::steady_clock;

constexpr uint32_t kRunning = 0, kDone = 1, kFailed = 2;

std::string aborted_message(const std::string& reason) { return "the in-process group was aborted: " + reason; }
}  // namespace

// One all-reduce, shared by the W ranks' Work handles.
struct RingExecutor::Job {
  explicit Job(int world_size)
      : bufs(static_cast<size_t>(world_size)),
        record(static_cast<size_t>(world_size), 0),
        reports(static_cast<size_t>(world_size)),
        steps(static_cast<size_t>(world_size)) {}
  std::vector<Tensor> bufs;   // per rank: its flat buffer
  std::vector<size_t> record;
  int arrived = 0;            // ranks that started it (under the executor's mutex)
  // Written by the communication thread before `state` leaves kRunning; read by waiters after.
  std::vector<CollectiveReport> reports;
  std::vector<std::vector<RingStep>> steps;
  Clock::time_point started{}, finished{};
  std::string error;
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
    uint32_t s = job_->state.load(std::memory_order_acquire);
    while (s == kRunning) {
      // Run it (or an earlier one) here if the communication thread has not started it. Otherwise
      // park at once rather than spin: the all-reduce runs for a while on a thread that, with more
      // threads than cores, needs this one's core.
      if (!executor_.run_next_ready()) park_until_change(job_->state, kRunning);
      s = job_->state.load(std::memory_order_acquire);
    }
    if (s == kFailed) throw Error(job_->error);
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
  ready_.fetch_add(1, std::memory_order_release);
  ready_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void RingExecutor::fail_pending(const std::string& message) {
  for (auto& job : pending_) {
    job->error = message;
    job->bufs.clear();
    job->settle(kFailed);
  }
  first_seq_ += pending_.size();
  pending_.clear();
}

void RingExecutor::abort(const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (!aborted_) abort_reason_ = reason;
  aborted_ = true;
  fail_pending(aborted_message(abort_reason_));
}

std::shared_ptr<Work> RingExecutor::start(int rank, const Tensor& buf, size_t record_values) {
  check(rank >= 0 && rank < world_size_, "RingExecutor: no rank " + std::to_string(rank));
  std::shared_ptr<Job> job;
  bool complete = false;
  {
    std::lock_guard lock(mutex_);
    if (aborted_ || stopping_) throw Error(aborted_message(aborted_ ? abort_reason_ : "the group is being destroyed"));
    const uint64_t seq = next_seq_[static_cast<size_t>(rank)]++;
    const size_t index = static_cast<size_t>(seq - first_seq_);
    while (pending_.size() <= index) pending_.push_back(std::make_shared<Job>(world_size_));
    job = pending_[index];
    job->bufs[static_cast<size_t>(rank)] = buf.reshape({buf.numel()});
    job->record[static_cast<size_t>(rank)] = record_values;
    complete = ++job->arrived == world_size_;
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  if (complete) {
    ready_.fetch_add(1, std::memory_order_release);
    ready_.notify_one();
  }
  return std::make_shared<RingWork>(*this, job, rank);
}

bool RingExecutor::run_next_ready() {
  std::shared_ptr<Job> job;
  {
    std::lock_guard lock(mutex_);
    // In start order: the front is taken once every rank started it.
    if (stopping_ || pending_.empty() || pending_.front()->arrived != world_size_) return false;
    job = std::move(pending_.front());
    pending_.pop_front();
    ++first_seq_;
  }
  execute(*job);
  return true;
}

void RingExecutor::execute(Job& job) {
  const SpinPolicy::HelperRunning helper;  // a rank spinning at a stage's end meanwhile is not short of cores
  try {
    run(job);
    job.settle(kDone);
  } catch (const std::exception& e) {
    job.error = e.what();
    job.bufs.clear();
    job.settle(kFailed);
  }
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
    if (!run_next_ready()) park_until_change(ready_, seen);
  }
}

void RingExecutor::run(Job& job) {
  const int W = world_size_;
  const Tensor& first = job.bufs[0];
  for (int r = 1; r < W; ++r) {
    const Tensor& b = job.bufs[static_cast<size_t>(r)];
    check(b.numel() == first.numel() && b.dtype() == first.dtype(),
          "all_reduce: rank " + std::to_string(r) + " brought " + std::to_string(b.numel()) + " " +
              dtype_name(b.dtype()) + " elements but rank 0 brought " + std::to_string(first.numel()) + " " +
              dtype_name(first.dtype()) + "; every rank must call the same collectives with the same sizes");
  }
  job.started = Clock::now();
  const auto offsets = ring_chunk_offsets(first.numel(), W);
  const size_t esize = dtype_size(first.dtype());
  for (auto& s : job.steps) s.clear();
  std::vector<std::vector<double>> before(static_cast<size_t>(W));
  for (int phase = 0; phase < 2 && W > 1; ++phase) {
    for (int s = 0; s < W - 1; ++s) {
      for (int r = 0; r < W; ++r) {
        const size_t keep = job.record[static_cast<size_t>(r)];
        before[static_cast<size_t>(r)] = keep > 0 ? job.bufs[static_cast<size_t>(r)].to_doubles(keep) : std::vector<double>{};
      }
      const auto ts = Clock::now();
      for (int r = 0; r < W; ++r) {
        const int from = (r + W - 1) % W;
        ring_receive(phase, job.bufs[static_cast<size_t>(r)], job.bufs[static_cast<size_t>(from)],
                     ring_move(phase, r, s, W).recv_chunk, offsets);
      }
      const double seconds = std::chrono::duration<double>(Clock::now() - ts).count();
      for (int r = 0; r < W; ++r) {
        const auto [send, recv] = ring_move(phase, r, s, W);
        const size_t keep = job.record[static_cast<size_t>(r)];
        const size_t bytes = static_cast<size_t>(offsets[static_cast<size_t>(send) + 1] - offsets[static_cast<size_t>(send)]) * esize;
        std::vector<double> after = keep > 0 ? job.bufs[static_cast<size_t>(r)].to_doubles(keep) : std::vector<double>{};
        job.steps[static_cast<size_t>(r)].push_back({phase == 0 ? "reduce-scatter" : "all-gather", s, (r + 1) % W,
                                                     (r + W - 1) % W, send, recv, bytes, seconds,
                                                     std::move(before[static_cast<size_t>(r)]), std::move(after)});
      }
    }
  }
  job.finished = Clock::now();
  const double seconds = std::chrono::duration<double>(job.finished - job.started).count();
  for (auto& report : job.reports) {
    report = {"all_reduce", W, first.nbytes()};
    report.seconds = seconds;
    finish_report(report);
  }
  job.bufs.clear();  // the Work handles outlive the all-reduce; the ranks' buffers are theirs again
}

}  // namespace dpv
