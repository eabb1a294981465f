// The in-process ring: world endpoints over one hub (see in_process_group.h).
#include "engine/process_groups/in_process_group.h"

#include <chrono>
#include <atomic>
#include <mutex>

#include "engine/backend.h"
#include "engine/device.h"
#include "engine/process_groups/ring_executor.h"
#include "engine/process_groups/ring_steps.h"
#include "engine/error.h"
#include "engine/spin_wait.h"

namespace dpv {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Tensor flat(const Tensor& t) { return t.reshape({t.numel()}); }
}  // namespace

std::vector<int64_t> ring_chunk_offsets(int64_t numel, int world_size) {
  check(world_size >= 1, "world_size must be at least 1, got " + std::to_string(world_size));
  std::vector<int64_t> offsets{0};
  const int64_t base = numel / world_size, extra = numel % world_size;
  for (int c = 0; c < world_size; ++c) offsets.push_back(offsets.back() + base + (c < extra ? 1 : 0));
  return offsets;
}

class InProcessHub {
 public:
  explicit InProcessHub(int world_size)
      : world_size_(world_size), posted_(static_cast<size_t>(world_size)), executor_(world_size) {}
  int world_size() const { return world_size_; }
  RingExecutor& executor() { return executor_; }

  // What each rank brings to the current collective.
  struct Post {
    const Tensor* tensor = nullptr;
    int64_t numel = 0;
    DType dtype = DType::Float32;
    const std::vector<Tensor*>* many = nullptr;  // broadcast_each: every buffer of the group
  };

  // Posts this rank's tensor and waits until every rank has posted; then checks they agree.
  void post_and_wait(int rank, const Tensor* t, const char* op) {
    post_and_wait(rank, Post{t, t ? t->numel() : 0, t ? t->dtype() : DType::Float32}, op);
  }
  // Posts several buffers at once (numel: their total, dtype: the first's).
  void post_many_and_wait(int rank, const std::vector<Tensor*>& many, const char* op) {
    int64_t numel = 0;
    for (const Tensor* t : many) numel += t->numel();
    post_and_wait(rank, Post{nullptr, numel, many.empty() ? DType::Float32 : many[0]->dtype(), &many}, op);
  }
  void post_and_wait(int rank, const Post& post, const char* op) {
    // Each rank writes only its own slot; the barrier publishes it to the others.
    posted_[static_cast<size_t>(rank)] = post;
    wait_all();
    const Post& first = posted_[0];
    for (int w = 1; w < world_size_; ++w) {
      const Post& p = posted_[static_cast<size_t>(w)];
      check(p.numel == first.numel && p.dtype == first.dtype,
            std::string(op) + ": rank " + std::to_string(w) + " brought " + std::to_string(p.numel) + " " +
                dtype_name(p.dtype) + " elements but rank 0 brought " + std::to_string(first.numel) + " " +
                dtype_name(first.dtype) + "; every rank must call the same collectives with the same sizes");
    }
  }
  const Tensor& posted(int rank) const { return *posted_[static_cast<size_t>(rank)].tensor; }
  const Tensor& posted(int rank, size_t index) const { return *posted_[static_cast<size_t>(rank)].many->at(index); }

  // Every rank of the group meets here. Throws once the hub is aborted. A ring all-reduce passes
  // 2 world - 1 of these, so it is a spinning barrier (engine/spin_wait.h): microseconds per step, no
  // mutex, and parked threads when a rank is slow.
  void wait_all() {
    if (generation_.load(std::memory_order_acquire) & kAborted) throw aborted_error();
    const uint64_t generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == world_size_) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_acq_rel);  // releases every rank's writes to every rank
      generation_.notify_all();
      return;
    }
    const uint64_t now = wait_for_change(generation_, generation);
    // Completed (the count moved) even if an abort came right after: this barrier was passed.
    if ((now & ~kAborted) == (generation & ~kAborted)) throw aborted_error();
  }

  void abort(const std::string& reason) {
    {
      std::lock_guard<std::mutex> lock(reason_mutex_);
      if (!(generation_.load(std::memory_order_acquire) & kAborted)) reason_ = reason;
      generation_.fetch_or(kAborted, std::memory_order_acq_rel);
    }
    generation_.notify_all();
    executor_.abort(reason);
  }

 private:
  static constexpr uint64_t kAborted = uint64_t{1} << 63;  // in generation_: no barrier completes any more
  Error aborted_error() {
    std::lock_guard<std::mutex> lock(reason_mutex_);
    return Error("the in-process group was aborted: " + reason_, ErrorClass::RuntimeError, ErrorReason::GroupAborted);
  }

  int world_size_;
  alignas(64) std::atomic<int> arrived_{0};
  alignas(64) std::atomic<uint64_t> generation_{0};  // barriers completed, plus kAborted
  std::mutex reason_mutex_;
  std::string reason_;
  std::vector<Post> posted_;
  RingExecutor executor_;  // started all-reduces: independent of the barrier above
};

namespace {

class InProcessGroup final : public ProcessGroup {
 public:
  InProcessGroup(std::shared_ptr<InProcessHub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_->world_size(); }
  std::string backend() const override { return "in-process ring"; }
  InProcessHub& hub() { return *hub_; }

  CollectiveReport all_reduce_sum(Tensor& buf, std::vector<RingStep>* steps) override {
    const auto t0 = std::chrono::steady_clock::now();
    CollectiveReport r{CollectiveOp::AllReduce, size(), buf.nbytes()};
    if (steps) steps->clear();
    hub_->post_and_wait(rank_, &buf, "all_reduce");
    Tensor mine = flat(buf);
    run_ring_phase(0, RingSchedule::AllReduce, mine, steps);
    run_ring_phase(1, RingSchedule::AllReduce, mine, steps);
    r.seconds = seconds_since(t0);
    finish_report(r);
    return r;
  }

  // The all-reduce's first phase on a copy of `in`, with every chunk index one less (ring_steps.h),
  // so that this rank completes chunk `rank` (PyTorch's assignment) in the same world-1 steps.
  CollectiveReport reduce_scatter_sum(const Tensor& in, Tensor& out, std::vector<RingStep>* steps) override {
    const auto t0 = std::chrono::steady_clock::now();
    const int world = size();
    check(in.numel() == out.numel() * world && out.dtype() == in.dtype(),
          "reduce_scatter: the input must hold world_size (" + std::to_string(world) + ") x the output's " +
              std::to_string(out.numel()) + " " + dtype_name(out.dtype()) + " elements, got " +
              std::to_string(in.numel()) + " " + dtype_name(in.dtype()) +
              "; pad the input to a multiple of world_size before the call");
    CollectiveReport r{CollectiveOp::ReduceScatter, world, in.nbytes()};
    if (steps) steps->clear();
    Tensor mine = flat(in).clone();  // [world * numel(out)]: the ring's partial sums, `in` stays as it was
    hub_->post_and_wait(rank_, &mine, "reduce_scatter");
    run_ring_phase(0, RingSchedule::RankOwnsItsChunk, mine, steps);
    flat(out).copy_from(mine.slice0(rank_ * out.numel(), (rank_ + 1) * out.numel()));
    r.seconds = seconds_since(t0);
    finish_report(r);
    return r;
  }

  CollectiveReport broadcast(Tensor& buf, int root) override {
    const auto t0 = std::chrono::steady_clock::now();
    check(root >= 0 && root < size(), "broadcast: invalid root " + std::to_string(root));
    CollectiveReport r{CollectiveOp::Broadcast, size(), buf.nbytes()};
    hub_->post_and_wait(rank_, &buf, "broadcast");
    if (rank_ != root) buf.copy_from(hub_->posted(root));
    hub_->wait_all();
    r.seconds = seconds_since(t0);
    finish_report(r);
    return r;
  }

  // Every rank posts its list once, copies each buffer from its root, and meets the others once
  // more: two barriers for the whole group instead of two per buffer.
  std::vector<CollectiveReport> broadcast_each(const std::vector<Tensor*>& bufs, const std::vector<int>& roots) override {
    const auto t0 = std::chrono::steady_clock::now();
    check(bufs.size() == roots.size(), "broadcast_each: one root per buffer");
    for (int root : roots) check(root >= 0 && root < size(), "broadcast: invalid root " + std::to_string(root));
    hub_->post_many_and_wait(rank_, bufs, "broadcast");
    for (size_t i = 0; i < bufs.size(); ++i)
      if (roots[i] != rank_) {
        const Tensor& from = hub_->posted(roots[i], i);
        check(from.numel() == bufs[i]->numel() && from.dtype() == bufs[i]->dtype(),
              "broadcast: buffer " + std::to_string(i) + " differs between ranks " + std::to_string(roots[i]) +
                  " and " + std::to_string(rank_) + "; every rank must bring the same buffers");
        bufs[i]->copy_from(from);
      }
    hub_->wait_all();
    const double seconds = seconds_since(t0);
    std::vector<CollectiveReport> reports;
    for (const Tensor* buf : bufs) {
      CollectiveReport r{CollectiveOp::Broadcast, size(), buf->nbytes()};
      r.seconds = seconds;  // all were in flight together, as async broadcasts waited together
      finish_report(r);
      reports.push_back(r);
    }
    return reports;
  }

  // The all-reduce's second phase over `out`, starting from this rank's piece in slot `rank`
  // (every chunk index one less than in the all-reduce, ring_steps.h): so reduce_scatter_sum then
  // all_gather run the all-reduce's two phases with the same chunks and the same steps.
  CollectiveReport all_gather(const Tensor& in, Tensor& out, std::vector<RingStep>* steps) override {
    const auto t0 = std::chrono::steady_clock::now();
    const int world = size();
    check(out.numel() == in.numel() * world && out.dtype() == in.dtype(),
          "all_gather: the output must hold world_size * " + std::to_string(in.numel()) + " " + dtype_name(in.dtype()) +
              " elements, got " + std::to_string(out.numel()) + " " + dtype_name(out.dtype()));
    CollectiveReport r{CollectiveOp::AllGather, world, out.nbytes()};
    if (steps) steps->clear();
    Tensor mine = flat(out);
    Tensor own = mine.slice0(rank_ * in.numel(), (rank_ + 1) * in.numel());
    if (own.raw() != in.raw() || own.device() != in.device()) own.copy_from(flat(in));  // in may already be that slot
    hub_->post_and_wait(rank_, &mine, "all_gather");  // publishes every rank's own piece
    run_ring_phase(1, RingSchedule::RankOwnsItsChunk, mine, steps);
    r.seconds = seconds_since(t0);
    finish_report(r);
    return r;
  }

  void barrier() override { hub_->wait_all(); }

  std::shared_ptr<Work> start_all_reduce_sum(Tensor& buf, double premultiply = 1.0) override {
    if (!buf.on_host_memory()) return nullptr;  // device memory: the ranks' own threads copy it
    return hub_->executor().start(rank_, buf, record_values_, premultiply);
  }
  bool starts_all_reduce_on_host() const override { return true; }
  void set_record_values(size_t max_values) { record_values_ = max_values; }

 private:
  // One phase of the ring (0 reduce-scatter, 1 all-gather) over `mine`, this rank's posted flat
  // buffer: world-1 steps, each receiving one chunk from the predecessor's posted buffer, every
  // rank meeting at a barrier after each step. Appends a RingStep per step to `steps` (if any).
  void run_ring_phase(int phase, RingSchedule schedule, Tensor& mine, std::vector<RingStep>* steps) {
    const int world = size();
    if (world == 1) return;
    const auto off = ring_chunk_offsets(mine.numel(), world);
    const size_t esize = dtype_size(mine.dtype());
    const int from = (rank_ + world - 1) % world, to = (rank_ + 1) % world;
    const Tensor from_buf = flat(hub_->posted(from));
    for (int s = 0; s < world - 1; ++s) {
      std::vector<double> before;
      if (steps && record_values_ > 0) before = mine.to_doubles(record_values_);
      const auto ts = std::chrono::steady_clock::now();
      const auto [send, recv] = ring_move(phase, rank_, s, world, schedule);
      ring_receive(phase, mine, from_buf, recv, off);
      hub_->wait_all();  // nobody reads a chunk of step s+1 before every rank finished step s
      if (steps) {
        const size_t bytes = static_cast<size_t>(off[static_cast<size_t>(send) + 1] - off[static_cast<size_t>(send)]) * esize;
        const double seconds = seconds_since(ts);
        // Only this rank writes its own buffer, so reading it here races with nobody.
        std::vector<double> after = record_values_ > 0 ? mine.to_doubles(record_values_) : std::vector<double>{};
        steps->push_back({phase == 0 ? "reduce-scatter" : "all-gather", s, to, from, send, recv, bytes, seconds,
                          std::move(before), std::move(after)});
      }
    }
  }

  std::shared_ptr<InProcessHub> hub_;
  int rank_;
  size_t record_values_ = 0;  // elements of the buffer copied before and after each step
};

}  // namespace

std::vector<std::unique_ptr<ProcessGroup>> make_in_process_group(int world_size) {
  check(world_size >= 1, "an in-process group needs at least one rank, got " + std::to_string(world_size));
  auto hub = std::make_shared<InProcessHub>(world_size);
  std::vector<std::unique_ptr<ProcessGroup>> ranks;
  for (int r = 0; r < world_size; ++r) ranks.push_back(std::make_unique<InProcessGroup>(hub, r));
  return ranks;
}

void abort_in_process_group(ProcessGroup& group, const std::string& reason) {
  auto* g = dynamic_cast<InProcessGroup*>(&group);
  check(g != nullptr, "abort_in_process_group: the group (" + group.backend() + ") is not an in-process group");
  g->hub().abort(reason);
}

void record_ring_values(ProcessGroup& group, size_t max_values) {
  auto* g = dynamic_cast<InProcessGroup*>(&group);
  check(g != nullptr, "record_ring_values: the group (" + group.backend() + ") is not an in-process group");
  g->set_record_values(max_values);
}

}  // namespace dpv
