// The NCCL process group of one launched GPU rank: one process per GPU, as PyTorch's "nccl"
// backend. Bootstrap as in PyTorch: cudaSetDevice(local rank) first (or every rank would open a
// context on GPU 0), rank 0 calls ncclGetUniqueId and puts the 128 bytes in the store, the others
// read them, all call ncclCommInitRank. Each collective runs on the stream of the tensor's device
// (so it follows the work already queued there) and is waited for with a deadline: a peer that
// never arrives makes it abort the communicator and throw, instead of hanging.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <string>
#include <thread>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_entry.h"
#include "engine/process_groups/process_group.h"
#include "engine/error.h"

namespace dpv {
namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_dtype(DType dt) {
  switch (dt) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int64: return ncclInt64;
  }
  return ncclFloat32;
}

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(int rank, int world_size, int local_rank, int64_t timeout_ms, const StoreSet& store_set,
                   const StoreGet& store_get)
      : rank_(rank), size_(world_size), ordinal_(local_rank), timeout_(timeout_ms) {
    int count = 0;
    DPV_CUDA_CHECK(cudaGetDeviceCount(&count));
    if (local_rank >= count)
      throw Error("rank " + std::to_string(rank) + " has LOCAL_RANK " + std::to_string(local_rank) +
                  " but this node has " + std::to_string(count) +
                  " GPU(s): start at most one process per GPU (LOCAL_WORLD_SIZE at most " + std::to_string(count) + ")")
          .about_settings({"LOCAL_WORLD_SIZE"});
    DPV_CUDA_CHECK(cudaSetDevice(ordinal_));
    ncclUniqueId id;
    const std::string key = "nccl/unique_id";
    if (rank == 0) {
      DPV_CUDA_CHECK(ncclGetUniqueId(&id));
      store_set(key, std::vector<char>(id.internal, id.internal + sizeof(id.internal)));
    } else {
      std::vector<char> bytes = store_get(key);
      check(bytes.size() == sizeof(id.internal), "the NCCL unique id in the store has the wrong size");
      std::copy(bytes.begin(), bytes.end(), id.internal);
    }
    DPV_CUDA_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
    DPV_CUDA_CHECK(cudaStreamCreateWithFlags(&own_stream_, cudaStreamNonBlocking));
    DPV_CUDA_CHECK(cudaMalloc(&barrier_buf_, sizeof(float)));
  }

  ~NcclProcessGroup() override {
    cudaSetDevice(ordinal_);
    if (comm_) ncclCommDestroy(comm_);
    if (barrier_buf_) cudaFree(barrier_buf_);
    if (own_stream_) cudaStreamDestroy(own_stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  CollectiveReport all_reduce_sum(Tensor& buf, std::vector<RingStep>* steps) override {
    if (steps) steps->clear();  // NCCL does not expose its ring steps
    cudaStream_t s = stream_of(buf, "all_reduce");
    return run(CollectiveOp::AllReduce, buf.nbytes(), s, [&] {
      DPV_CUDA_CHECK(ncclAllReduce(buf.raw(), buf.raw(), static_cast<size_t>(buf.numel()), nccl_dtype(buf.dtype()),
                                   ncclSum, comm_, s));
    });
  }

  CollectiveReport broadcast(Tensor& buf, int root) override {
    check(root >= 0 && root < size_, "broadcast: root " + std::to_string(root) + " is not a rank of this group");
    cudaStream_t s = stream_of(buf, "broadcast");
    return run(CollectiveOp::Broadcast, buf.nbytes(), s, [&] {
      DPV_CUDA_CHECK(ncclBroadcast(buf.raw(), buf.raw(), static_cast<size_t>(buf.numel()), nccl_dtype(buf.dtype()),
                                   root, comm_, s));
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
      DPV_CUDA_CHECK(ncclReduceScatter(in.raw(), out.raw(), static_cast<size_t>(out.numel()), nccl_dtype(in.dtype()),
                                       ncclSum, comm_, s));
    });
  }

  CollectiveReport all_gather(const Tensor& in, Tensor& out, std::vector<RingStep>* steps) override {
    if (steps) steps->clear();  // NCCL does not expose its ring steps
    check(in.dtype() == out.dtype() && out.numel() == in.numel() * size_,
          "all_gather: the output must hold world size x the input's elements of the same dtype");
    cudaStream_t s = stream_of(in, "all_gather");
    stream_of(out, "all_gather");
    return run(CollectiveOp::AllGather, out.nbytes(), s, [&] {
      DPV_CUDA_CHECK(ncclAllGather(in.raw(), out.raw(), static_cast<size_t>(in.numel()), nccl_dtype(in.dtype()),
                                   comm_, s));
    });
  }

  void barrier() override {
    run(CollectiveOp::Barrier, 0, own_stream_, [&] {
      DPV_CUDA_CHECK(ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclFloat32, ncclSum, comm_, own_stream_));
    });
  }

 private:
  cudaStream_t stream_of(const Tensor& t, const char* op) const {
    CudaBackend* be = CudaBackend::of(t.device());
    if (be == nullptr)
      throw Error(std::string("nccl ") + op +
                  ": the tensor must be on this rank's GPU (NCCL moves GPU tensors; use the gloo backend "
                  "for CPU tensors, DPV_BACKEND=gloo)")
          .about_settings({"DPV_BACKEND"});
    check(be->ordinal() == ordinal_, std::string("nccl ") + op + ": the tensor is on " + be->where() +
                                         " but this rank's GPU is cuda:" + std::to_string(ordinal_));
    return be->stream();
  }

  template <typename Body>
  CollectiveReport run(CollectiveOp op, size_t bytes, cudaStream_t s, Body body) {
    DPV_CUDA_CHECK(cudaSetDevice(ordinal_));
    DPV_CUDA_CHECK(cudaStreamSynchronize(s));  // earlier work on the stream is not this collective's time
    CollectiveReport r;
    r.op = op;
    r.ranks = size_;
    r.bytes = bytes;
    const auto start = Clock::now();
    body();
    wait_with_deadline(collective_op_name(op), s);
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    finish_report(r);
    return r;
  }

  // Polls the stream until the collective is done; past the deadline, or when NCCL reports an
  // asynchronous error (a peer died), aborts the communicator so nothing stays blocked.
  void wait_with_deadline(const char* op, cudaStream_t s) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_);
    for (;;) {
      cudaError_t q = cudaStreamQuery(s);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) DPV_CUDA_CHECK(q);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      const bool late = Clock::now() >= deadline;
      if (async != ncclSuccess || late) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        throw Error(std::string("nccl ") + op + " on rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                    (late ? " timed out after " + std::to_string(timeout_ / 1000.0) + " s waiting for its peers"
                          : std::string(" failed: ") + ncclGetErrorString(async)) +
                    " (did another rank stop?)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  int rank_, size_, ordinal_;
  int64_t timeout_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t own_stream_ = nullptr;
  void* barrier_buf_ = nullptr;
};

}  // namespace

std::unique_ptr<ProcessGroup> cuda_entry::make_nccl_process_group(int rank, int world_size, int local_rank,
                                                                   int64_t timeout_ms, StoreSet store_set,
                                                                   StoreGet store_get) {
  return std::make_unique<NcclProcessGroup>(rank, world_size, local_rank, timeout_ms, store_set, store_get);
}

}  // namespace dpv
