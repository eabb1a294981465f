// The NCCL process group of one launched GPU rank: one process per GPU, as PyTorch's "nccl"
// backend. Bootstrap as in PyTorch: cudaSetDevice(local rank) first (or every rank would open a
// context on GPU 0), rank 0 calls ncclGetUniqueId and puts the 128 bytes in the store, the others
// read them, all call ncclCommInitRankConfig. The communicator is non-blocking (blocking = 0):
// joining it and every collective return at once and are polled against a deadline taken before
// the call (engine/process_groups/comm_control.h), so a rank that never joins or never arrives
// makes the others fail within the timeout, with the communicator aborted, instead of hanging.
// Each collective runs on the stream of the tensor's device (so it follows the work already
// queued there) and is timed by CUDA events recorded around it alone.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <exception>
#include <mutex>
#include <string>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_entry.h"
#include "engine/process_groups/comm_control.h"
#include "engine/process_groups/process_group.h"
#include "engine/error.h"

namespace dpv {
namespace {

ncclDataType_t nccl_dtype(DType dt) {
  switch (dt) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int64: return ncclInt64;
  }
  return ncclFloat32;
}

// What to check when a collective fails or times out: the usual causes, in PyTorch's terms.
constexpr const char* kCheckPeers =
    "check that every rank is alive and calls the same collectives in the same order (a rank that "
    "stopped or waits in another collective), and that NCCL can reach every rank (NCCL_SOCKET_IFNAME)";
constexpr const char* kCheckJoin =
    "check that all ranks were started (each with its own RANK and LOCAL_RANK) and that NCCL can reach "
    "every rank's node (NCCL_SOCKET_IFNAME); NCCL_DEBUG=INFO shows where it stopped";

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(int rank, int world_size, int local_rank, int64_t timeout_ms, const StoreSet& store_set,
                   const StoreGet& store_get)
      : rank_(rank), size_(world_size), ordinal_(local_rank),
        control_("nccl", rank, world_size, std::chrono::milliseconds(timeout_ms), [this] { abort_comm(); }) {
    int count = 0;
    DPV_CUDA_CHECK(cudaGetDeviceCount(&count));
    if (local_rank >= count)
      throw Error("rank " + std::to_string(rank) + " has LOCAL_RANK " + std::to_string(local_rank) +
                  " but this node has " + std::to_string(count) +
                  " GPU(s): start at most one process per GPU (LOCAL_WORLD_SIZE at most " + std::to_string(count) + ")")
          .about_settings({"LOCAL_WORLD_SIZE"});
    DPV_CUDA_CHECK(cudaSetDevice(ordinal_));
    const ncclUniqueId id = exchange_unique_id(store_set, store_get);
    try {
      join(id);
      DPV_CUDA_CHECK(cudaStreamCreateWithFlags(&own_stream_, cudaStreamNonBlocking));
      DPV_CUDA_CHECK(cudaMalloc(&barrier_buf_, sizeof(float)));
      DPV_CUDA_CHECK(cudaEventCreate(&start_));
      DPV_CUDA_CHECK(cudaEventCreate(&end_));
    } catch (...) {
      release();  // the destructor does not run for a half-built group
      throw;
    }
  }

  ~NcclProcessGroup() override { release(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  CollectiveReport all_reduce_sum(Tensor& buf, std::vector<RingStep>* steps) override {
    if (steps) steps->clear();  // NCCL does not expose its ring steps
    cudaStream_t s = stream_of(buf, "all_reduce");
    return run(CollectiveOp::AllReduce, buf.nbytes(), s, [&] {
      return ncclAllReduce(buf.raw(), buf.raw(), static_cast<size_t>(buf.numel()), nccl_dtype(buf.dtype()), ncclSum,
                           comm_, s);
    });
  }

  CollectiveReport broadcast(Tensor& buf, int root) override {
    check(root >= 0 && root < size_, "broadcast: root " + std::to_string(root) + " is not a rank of this group");
    cudaStream_t s = stream_of(buf, "broadcast");
    return run(CollectiveOp::Broadcast, buf.nbytes(), s, [&] {
      return ncclBroadcast(buf.raw(), buf.raw(), static_cast<size_t>(buf.numel()), nccl_dtype(buf.dtype()), root,
                           comm_, s);
    });
  }

  // ncclReduceScatter: rank r gets chunk r of the sum, as torch.distributed.reduce_scatter_tensor.
  CollectiveReport reduce_scatter_sum(const Tensor& in, Tensor& out, std::vector<RingStep>* steps) override {
    if (steps) steps->clear();  // NCCL does not expose its ring steps
    check(in.dtype() == out.dtype() && in.numel() == out.numel() * size_,
          "reduce_scatter: the input must hold world size x the output's elements of the same dtype (got " +
              std::to_string(in.numel()) + " for " + std::to_string(out.numel()) + " x " + std::to_string(size_) +
              "); pad the input to a multiple of the world size before the call");
    cudaStream_t s = stream_of(in, "reduce_scatter");
    stream_of(out, "reduce_scatter");
    return run(CollectiveOp::ReduceScatter, in.nbytes(), s, [&] {
      return ncclReduceScatter(in.raw(), out.raw(), static_cast<size_t>(out.numel()), nccl_dtype(in.dtype()), ncclSum,
                               comm_, s);
    });
  }

  CollectiveReport all_gather(const Tensor& in, Tensor& out, std::vector<RingStep>* steps) override {
    if (steps) steps->clear();  // NCCL does not expose its ring steps
    check(in.dtype() == out.dtype() && out.numel() == in.numel() * size_,
          "all_gather: the output must hold world size x the input's elements of the same dtype");
    cudaStream_t s = stream_of(in, "all_gather");
    stream_of(out, "all_gather");
    return run(CollectiveOp::AllGather, out.nbytes(), s, [&] {
      return ncclAllGather(in.raw(), out.raw(), static_cast<size_t>(in.numel()), nccl_dtype(in.dtype()), comm_, s);
    });
  }

  void barrier() override {
    run(CollectiveOp::Barrier, 0, own_stream_, [&] {
      return ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclFloat32, ncclSum, comm_, own_stream_);
    });
  }

 private:
  // Rank 0 makes the id and puts it in the store; the others read it (the store's get waits for it,
  // bounded by the store's own timeout).
  ncclUniqueId exchange_unique_id(const StoreSet& store_set, const StoreGet& store_get) {
    ncclUniqueId id;
    const std::string key = "nccl/unique_id";
    if (rank_ == 0) {
      DPV_CUDA_CHECK(ncclGetUniqueId(&id));
      store_set(key, std::vector<char>(id.internal, id.internal + sizeof(id.internal)));
    } else {
      std::vector<char> bytes = store_get(key);
      check(bytes.size() == sizeof(id.internal), "the NCCL unique id in the store has the wrong size");
      std::copy(bytes.begin(), bytes.end(), id.internal);
    }
    return id;
  }

  // ncclCommInitRankConfig, non-blocking: it returns at once and is polled until every rank joined.
  void join(const ncclUniqueId& id) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const auto deadline = control_.deadline_from_now();
    const ncclResult_t r = ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
    if (r != ncclSuccess && r != ncclInProgress)
      throw control_.abort_after("ncclCommInitRank (joining the group)", cuda_detail::nccl_error_text(r));
    control_.wait("ncclCommInitRank (joining the group)", deadline, [this] { return poll_async(); }, kCheckJoin);
  }

  cudaStream_t stream_of(const Tensor& t, const char* op) const {
    require_device_tensor(t, op);  // host memory: the check the CPU tests share
    CudaBackend* be = CudaBackend::of(t.device());
    if (be == nullptr) throw_not_on_device(op);
    check(be->ordinal() == ordinal_, std::string("nccl ") + op + ": the tensor is on " + be->where() +
                                         " but this rank's GPU is cuda:" + std::to_string(ordinal_));
    return be->stream();
  }

  // The collective's own time: events recorded on its stream right before the enqueue and right
  // after it, so neither the work queued before it nor the compute queued after it counts. One
  // deadline, taken before the enqueue, bounds both the enqueue (which in non-blocking mode may
  // still be connecting to the peers) and the collective.
  template <typename Enqueue>
  CollectiveReport run(CollectiveOp op, size_t bytes, cudaStream_t s, Enqueue enqueue) {
    const std::string what = collective_op_name(op);
    // One collective at a time: a communicator takes its calls in one order, and the events are shared.
    std::lock_guard<std::mutex> lock(run_mutex_);
    control_.check_usable(what);
    DPV_CUDA_CHECK(cudaSetDevice(ordinal_));
    CollectiveReport r;
    r.op = op;
    r.ranks = size_;
    r.bytes = bytes;
    const auto deadline = control_.deadline_from_now();
    DPV_CUDA_CHECK(cudaEventRecord(start_, s));
    const ncclResult_t status = enqueue();
    if (status != ncclSuccess && status != ncclInProgress)
      throw control_.abort_after(what, cuda_detail::nccl_error_text(status));
    control_.wait(what, deadline, [this] { return poll_async(); }, kCheckPeers);  // enqueued
    DPV_CUDA_CHECK(cudaEventRecord(end_, s));
    control_.wait(what, deadline, [this] { return poll_collective(); }, kCheckPeers);
    float ms = 0;
    DPV_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, end_));
    r.seconds = ms / 1000.0;
    finish_report(r);
    return r;
  }

  // The communicator's state: joining or enqueueing (in progress), ready, or failed.
  CommPoll poll_async() {
    ncclResult_t async = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm_, &async);
    if (q != ncclSuccess) return CommPoll::failed(cuda_detail::nccl_error_text(q));
    if (async == ncclInProgress) return CommPoll::pending();
    if (async != ncclSuccess) return CommPoll::failed(cuda_detail::nccl_error_text(async));
    return CommPoll::done();
  }

  // The collective in flight: done once its end event is, failed on the communicator's error (a
  // peer died) or the stream's.
  CommPoll poll_collective() {
    const CommPoll comm = poll_async();
    if (comm.state != CommPoll::State::Done) return comm;
    const cudaError_t e = cudaEventQuery(end_);
    if (e == cudaSuccess) return CommPoll::done();
    if (e == cudaErrorNotReady) return CommPoll::pending();
    cudaGetLastError();  // clears a non-sticky error so the next call does not report it again
    return CommPoll::failed(std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e));
  }

  void abort_comm() {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  // The communicator first (finalized, then destroyed; aborted when an exception is unwinding
  // through the group's owner, or nothing after an abort), then what the group made on its GPU;
  // never throws.
  void release() noexcept {
    cudaSetDevice(ordinal_);
    CommTeardown t;
    if (comm_) {
      t.finalize = [this] { ncclCommFinalize(comm_); };
      t.poll = [this] { return poll_async(); };
      t.destroy_comm = [this] {
        ncclCommDestroy(comm_);
        comm_ = nullptr;
      };
    }
    t.free_buffers = [this] {
      if (barrier_buf_) cudaFree(barrier_buf_);
      if (start_) cudaEventDestroy(start_);
      if (end_) cudaEventDestroy(end_);
      barrier_buf_ = nullptr;
      start_ = end_ = nullptr;
    };
    t.destroy_stream = [this] {
      if (own_stream_) cudaStreamDestroy(own_stream_);
      own_stream_ = nullptr;
    };
    control_.close(t, std::uncaught_exceptions() > 0);
  }

  int rank_, size_, ordinal_;
  CommControl control_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t own_stream_ = nullptr;
  void* barrier_buf_ = nullptr;  // [1] float32: the barrier's all-reduce
  cudaEvent_t start_ = nullptr;  // recorded right before a collective's enqueue
  cudaEvent_t end_ = nullptr;    // recorded right after it
  std::mutex run_mutex_;
};

}  // namespace

std::unique_ptr<ProcessGroup> cuda_entry::make_nccl_process_group(int rank, int world_size, int local_rank,
                                                                   int64_t timeout_ms, StoreSet store_set,
                                                                   StoreGet store_get) {
  return std::make_unique<NcclProcessGroup>(rank, world_size, local_rank, timeout_ms, store_set, store_get);
}

}  // namespace dpv
