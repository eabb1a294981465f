// Collectives over CUDA devices. Two transports:
//  - NCCL when every device of the set is a distinct GPU: one process drives all ranks
//    (ncclCommInitAll, then each call inside ncclGroupStart/End), as torch.cuda.comm and
//    nn.DataParallel do. NCCL refuses two ranks on one GPU, hence:
//  - peer copies for virtual devices sharing a GPU (cuda:0x4): cudaMemcpyAsync on the same GPU,
//    cudaMemcpyPeerAsync across GPUs, and the add_inplace kernel for the sums, all queued on one
//    stream in rank order, so reduce_add is exactly the left fold of torch.cuda.comm.reduce_add.
// Every call first waits for the work queued on the ranks' streams (its inputs), then times
// itself with CUDA events recorded on each rank's stream behind a LaunchGate that opens once the
// whole call is queued: seconds = the slowest rank's span of GPU work, without launch gaps.
// NCCL communicators are made before that timing starts (their set-up is not transfer time), each
// group is ended by a GroupGuard even when a call inside it throws, and NCCL launches on a GPU are
// serialised process-wide (two trainers on two threads must not interleave their groups).
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/collectives.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_entry.h"
#include "engine/cuda/group_guard.h"
#include "engine/cuda/launch_gate.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/index.h"
#include "kernels/add_inplace.h"

namespace dpv {

namespace {

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int64: return ncclInt64;
  }
  return ncclFloat32;
}

int add_on_stream(void* dst, const void* src, DType dt, int64_t n, cudaStream_t stream) {
  switch (dt) {
    case DType::Float32: return kernels::add_inplace(static_cast<float*>(dst), static_cast<const float*>(src), n, stream);
    case DType::Float64:
      return kernels::add_inplace(static_cast<double*>(dst), static_cast<const double*>(src), n, stream);
    case DType::Int64:
      return kernels::add_inplace(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), n, stream);
  }
  return 0;
}

const GroupCalls& nccl_group_calls() {
  static const GroupCalls calls{
      [] { return static_cast<int>(ncclGroupStart()); }, [] { return static_cast<int>(ncclGroupEnd()); },
      [](int status) { return std::string("NCCL: ") + ncclGetErrorString(static_cast<ncclResult_t>(status)); }};
  return calls;
}

// One mutex per GPU for the whole process. A collective holds the mutexes of its GPUs, taken in
// ascending GPU order (so two sets sharing GPUs cannot deadlock), from before its group starts
// until its work has finished: NCCL kernels of two communicators on one GPU must not interleave.
std::mutex& gpu_nccl_mutex(int ordinal) {
  static std::mutex guard;
  static std::map<int, std::unique_ptr<std::mutex>> mutexes;
  std::lock_guard<std::mutex> lock(guard);
  auto& m = mutexes[ordinal];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
}

class NcclLaunchLock {
 public:
  explicit NcclLaunchLock(const std::vector<int>& ascending_gpus) {
    for (int gpu : ascending_gpus) locks_.emplace_back(gpu_nccl_mutex(gpu));
  }

 private:
  std::vector<std::unique_lock<std::mutex>> locks_;
};

class CudaCollectives final : public Collectives {
 public:
  explicit CudaCollectives(std::shared_ptr<DeviceSet> devices) : devices_(std::move(devices)) {
    if (!devices_ || devices_->size() == 0) throw Error("CUDA collectives need a non-empty device set");
    std::vector<int> gpus;
    for (int i = 0; i < devices_->size(); ++i) {
      CudaBackend* be = CudaBackend::of(&(*devices_)[i]);
      if (!be) throw Error("CUDA collectives: device " + std::to_string(i) + " (" + (*devices_)[i].name() + ") is not a CUDA device");
      backends_.push_back(be);
      gpus.push_back(be->ordinal());
    }
    std::vector<int> sorted = gpus;
    std::sort(sorted.begin(), sorted.end());
    const bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
    use_nccl_ = distinct && gpus.size() >= 2;
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    gpu_set_ = sorted;
    enable_peer_access(sorted);
    start_.resize(backends_.size());
    stop_.resize(backends_.size());
    for (size_t i = 0; i < backends_.size(); ++i) {
      backends_[i]->activate();
      DPV_CUDA_CHECK(cudaEventCreate(&start_[i]));
      DPV_CUDA_CHECK(cudaEventCreate(&stop_[i]));
    }
  }

  ~CudaCollectives() override {
    for (auto& [ranks, comms] : comms_)
      for (ncclComm_t c : comms) ncclCommDestroy(c);
    for (size_t i = 0; i < backends_.size(); ++i) {
      cudaSetDevice(backends_[i]->ordinal());
      if (start_[i]) cudaEventDestroy(start_[i]);
      if (stop_[i]) cudaEventDestroy(stop_[i]);
    }
    cudaGetLastError();
  }

  std::string transport() const override { return use_nccl_ ? "NCCL" : "peer copies"; }

  CollectiveReport broadcast(std::vector<Tensor>& bufs, int root) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const int n = check_bufs(bufs, "broadcast", root);
    const size_t bytes = bufs[0].nbytes();
    std::unique_ptr<NcclLaunchLock> nccl_lock = use_nccl_ ? std::make_unique<NcclLaunchLock>(gpu_set_) : nullptr;
    std::vector<ncclComm_t>* nccl_comms = use_nccl_ ? &comms_for(n) : nullptr;  // made before the clock starts
    const double seconds = timed(n, [&] {
      if (use_nccl_) {
        auto& comms = *nccl_comms;
        GroupGuard group(nccl_group_calls());
        for (int i = 0; i < n; ++i)
          DPV_CUDA_CHECK(ncclBroadcast(bufs[i].raw(), bufs[i].raw(), ix(bufs[i].numel()),
                                       nccl_type(bufs[i].dtype()), root, comms[i], backends_[i]->stream()));
        group.end();
        return;
      }
      CudaBackend* driver = backends_[root];
      driver->activate();
      for (int i = 0; i < n; ++i)
        if (i != root) copy(bufs[i].raw(), i, bufs[root].raw(), root, bytes, driver->stream());
    });
    return report(CollectiveOp::Broadcast, n, bytes, seconds);
  }

  CollectiveReport reduce_add(std::vector<Tensor>& bufs, int root) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const int n = check_bufs(bufs, "reduce_add", root);
    const size_t bytes = bufs[0].nbytes();
    std::unique_ptr<NcclLaunchLock> nccl_lock = use_nccl_ ? std::make_unique<NcclLaunchLock>(gpu_set_) : nullptr;
    std::vector<ncclComm_t>* nccl_comms = use_nccl_ ? &comms_for(n) : nullptr;  // made before the clock starts
    const double seconds = timed(n, [&] {
      if (use_nccl_) {
        auto& comms = *nccl_comms;
        GroupGuard group(nccl_group_calls());
        for (int i = 0; i < n; ++i)
          DPV_CUDA_CHECK(ncclReduce(bufs[i].raw(), bufs[i].raw(), ix(bufs[i].numel()),
                                    nccl_type(bufs[i].dtype()), ncclSum, root, comms[i], backends_[i]->stream()));
        group.end();
        return;
      }
      fold_into(bufs, root);
    });
    return report(CollectiveOp::ReduceAdd, n, bytes, seconds);
  }

  CollectiveReport all_reduce(std::vector<Tensor>& bufs) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const int n = check_bufs(bufs, "all_reduce", 0);
    const size_t bytes = bufs[0].nbytes();
    std::unique_ptr<NcclLaunchLock> nccl_lock = use_nccl_ ? std::make_unique<NcclLaunchLock>(gpu_set_) : nullptr;
    std::vector<ncclComm_t>* nccl_comms = use_nccl_ ? &comms_for(n) : nullptr;  // made before the clock starts
    const double seconds = timed(n, [&] {
      if (use_nccl_) {
        auto& comms = *nccl_comms;
        GroupGuard group(nccl_group_calls());
        for (int i = 0; i < n; ++i)
          DPV_CUDA_CHECK(ncclAllReduce(bufs[i].raw(), bufs[i].raw(), ix(bufs[i].numel()),
                                       nccl_type(bufs[i].dtype()), ncclSum, comms[i], backends_[i]->stream()));
        group.end();
        return;
      }
      // Sum in rank order onto rank 0, then copy the sum back out: every rank gets the same bits.
      fold_into(bufs, 0);
      for (int i = 1; i < n; ++i) copy(bufs[i].raw(), i, bufs[0].raw(), 0, bytes, backends_[0]->stream());
    });
    return report(CollectiveOp::AllReduce, n, bytes, seconds);
  }

  CollectiveReport all_gather(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const int n = check_bufs(in, "all_gather", 0);
    if (static_cast<int>(out.size()) != n)
      throw Error("all_gather: " + std::to_string(out.size()) + " output buffers for " + std::to_string(n) + " ranks");
    const size_t piece = in[0].nbytes();
    for (int i = 0; i < n; ++i) {
      const Tensor& o = out[ix(i)];
      if (!o.defined() || o.device() != &(*devices_)[i] || o.dtype() != in[0].dtype() ||
          o.numel() != in[0].numel() * n)
        throw Error("all_gather: output " + std::to_string(i) + " must be a " + dtype_name(in[0].dtype()) + " tensor of " +
                    std::to_string(in[0].numel() * n) + " elements on device " + std::to_string(i));
    }
    std::unique_ptr<NcclLaunchLock> nccl_lock = use_nccl_ ? std::make_unique<NcclLaunchLock>(gpu_set_) : nullptr;
    std::vector<ncclComm_t>* nccl_comms = use_nccl_ ? &comms_for(n) : nullptr;  // made before the clock starts
    const double seconds = timed(n, [&] {
      if (use_nccl_) {
        auto& comms = *nccl_comms;
        GroupGuard group(nccl_group_calls());
        for (int i = 0; i < n; ++i)
          DPV_CUDA_CHECK(ncclAllGather(in[i].raw(), out[i].raw(), ix(in[i].numel()),
                                       nccl_type(in[i].dtype()), comms[i], backends_[i]->stream()));
        group.end();
        return;
      }
      CudaBackend* driver = backends_[0];
      driver->activate();
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
          copy(static_cast<char*>(out[i].raw()) + ix(j) * piece, i, in[j].raw(), j, piece,
               driver->stream());
    });
    return report(CollectiveOp::AllGather, n, piece * ix(n), seconds);
  }

 private:
  // Checks the buffers of a call: one per rank, rank i's on device i, all alike. Returns the rank count.
  int check_bufs(const std::vector<Tensor>& bufs, const char* op, int root) const {
    const int n = static_cast<int>(bufs.size());
    if (n < 1 || n > devices_->size())
      throw Error(std::string(op) + ": " + std::to_string(n) + " buffers for a set of " +
                  std::to_string(devices_->size()) + " devices");
    if (root < 0 || root >= n) throw Error(std::string(op) + ": root " + std::to_string(root) + " is not a rank");
    for (int i = 0; i < n; ++i) {
      const Tensor& t = bufs[ix(i)];
      if (!t.defined()) throw Error(std::string(op) + ": buffer " + std::to_string(i) + " is not defined");
      if (t.device() != &(*devices_)[i])
        throw Error(std::string(op) + ": buffer " + std::to_string(i) + " is on " + t.device_name() + ", not on " +
                    (*devices_)[i].name());
      if (t.dtype() != bufs[0].dtype() || t.numel() != bufs[0].numel())
        throw Error(std::string(op) + ": buffer " + std::to_string(i) + " (" + shape_str(t.shape()) + ", " +
                    dtype_name(t.dtype()) + ") differs from buffer 0 (" + shape_str(bufs[0].shape()) + ", " +
                    dtype_name(bufs[0].dtype()) + ")");
    }
    return n;
  }

  // Peer access for every peer-capable pair (a reads and writes b's memory), for plain
  // allocations (cudaDeviceEnablePeerAccess) and for the stream-ordered pools every tensor comes
  // from (cudaMemPoolSetAccess on each device's own pool: peer access does not cover pools).
  // Without it a cross-GPU copy of pool memory may be staged through the host.
  void enable_peer_access(const std::vector<int>& unique) {
    for (int a : unique)
      for (int b : unique) {
        if (a == b) continue;
        int can = 0;
        DPV_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
        if (!can) continue;  // cudaMemcpyPeerAsync still works, staged through the host
        DPV_CUDA_CHECK(cudaSetDevice(a));
        const cudaError_t status = cudaDeviceEnablePeerAccess(b, 0);
        if (status == cudaErrorPeerAccessAlreadyEnabled)
          cudaGetLastError();
        else
          DPV_CUDA_CHECK(status);
        cudaMemAccessDesc access{};
        access.location.type = cudaMemLocationTypeDevice;
        access.location.id = a;
        access.flags = cudaMemAccessFlagsProtReadWrite;
        for (CudaBackend* be : backends_)
          if (be->ordinal() == b) DPV_CUDA_CHECK(cudaMemPoolSetAccess(be->pool(), &access, 1));
      }
  }

  // NCCL communicators for the first `ranks` devices (a small batch uses fewer replicas).
  std::vector<ncclComm_t>& comms_for(int ranks) {
    auto it = comms_.find(ranks);
    if (it != comms_.end()) return it->second;
    std::vector<int> gpus;
    for (int i = 0; i < ranks; ++i) gpus.push_back(backends_[ix(i)]->ordinal());
    std::vector<ncclComm_t> comms(ix(ranks));
    DPV_CUDA_CHECK(ncclCommInitAll(comms.data(), ranks, gpus.data()));
    return comms_.emplace(ranks, std::move(comms)).first->second;
  }

  // Queues a device-to-device copy on `stream` (a stream of the driving GPU).
  void copy(void* dst, int dst_rank, const void* src, int src_rank, size_t bytes, cudaStream_t stream) const {
    const int dst_gpu = backends_[ix(dst_rank)]->ordinal();
    const int src_gpu = backends_[ix(src_rank)]->ordinal();
    if (dst_gpu == src_gpu)
      DPV_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
    else
      DPV_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_gpu, src, src_gpu, bytes, stream));
  }

  // bufs[root] += bufs[j] for j in rank order (skipping root), on root's stream. A buffer on
  // another GPU is first copied next to the root.
  void fold_into(std::vector<Tensor>& bufs, int root) {
    CudaBackend* driver = backends_[ix(root)];
    driver->activate();
    const Tensor& dst = bufs[ix(root)];
    const size_t bytes = dst.nbytes();
    void* staging = nullptr;
    for (int j = 0; j < static_cast<int>(bufs.size()); ++j) {
      if (j == root) continue;
      const void* src = bufs[ix(j)].raw();
      if (backends_[ix(j)]->ordinal() != driver->ordinal()) {
        if (!staging) DPV_CUDA_CHECK(cudaMallocAsync(&staging, bytes, driver->stream()));
        copy(staging, root, src, j, bytes, driver->stream());
        src = staging;
      }
      DPV_CUDA_CHECK(add_on_stream(dst.raw(), src, dst.dtype(), dst.numel(), driver->stream()));
    }
    if (staging) DPV_CUDA_CHECK(cudaFreeAsync(staging, driver->stream()));
  }

  // Runs `enqueue` between events on each rank's stream; returns the slowest rank's seconds. The
  // streams wait at a LaunchGate until everything is queued, so the span between the events is the
  // GPU's work, not the host's launch gaps between the calls of one collective.
  template <typename Enqueue>
  double timed(int ranks, Enqueue&& enqueue) {
    for (int i = 0; i < ranks; ++i) backends_[ix(i)]->synchronize();
    struct OpenOnExit {  // a throw while queuing opens the gate and lets the held streams drain
      LaunchGate& gate;
      const std::vector<CudaBackend*>& backends;
      int ranks;
      bool queued = false;
      ~OpenOnExit() {
        gate.open();
        if (!queued)
          for (int i = 0; i < ranks; ++i) cudaStreamSynchronize(backends[ix(i)]->stream());  // callbacks done
      }
    } open_on_exit{gate_, backends_, ranks};
    gate_.close();
    for (int i = 0; i < ranks; ++i) {
      backends_[ix(i)]->activate();
      DPV_CUDA_CHECK(gate_.hold(backends_[ix(i)]->stream()));
      DPV_CUDA_CHECK(cudaEventRecord(start_[ix(i)], backends_[ix(i)]->stream()));
    }
    enqueue();
    for (int i = 0; i < ranks; ++i) {
      backends_[ix(i)]->activate();
      DPV_CUDA_CHECK(cudaEventRecord(stop_[ix(i)], backends_[ix(i)]->stream()));
    }
    gate_.open();
    double seconds = 0;
    for (int i = 0; i < ranks; ++i) {
      backends_[ix(i)]->activate();
      DPV_CUDA_CHECK(cudaEventSynchronize(stop_[ix(i)]));
      float ms = 0;
      DPV_CUDA_CHECK(cudaEventElapsedTime(&ms, start_[ix(i)], stop_[ix(i)]));
      seconds = std::max(seconds, static_cast<double>(ms) / 1000.0);
    }
    open_on_exit.queued = true;
    // The peer-copy path queued everything on one stream: the other ranks must see its results
    // before their next work, which the event waits above already guarantee.
    return seconds;
  }

  static CollectiveReport report(CollectiveOp op, int ranks, size_t bytes, double seconds) {
    CollectiveReport r;
    r.op = op;
    r.ranks = ranks;
    r.bytes = bytes;
    r.seconds = seconds;
    finish_report(r);
    return r;
  }

  std::shared_ptr<DeviceSet> devices_;
  std::vector<CudaBackend*> backends_;
  bool use_nccl_ = false;
  std::vector<int> gpu_set_;  // the set's GPUs, ascending, each once
  std::map<int, std::vector<ncclComm_t>> comms_;
  std::vector<cudaEvent_t> start_, stop_;
  LaunchGate gate_;  // holds the ranks' streams while a collective is queued (timed)
  std::mutex mutex_;
};

}  // namespace

std::unique_ptr<Collectives> cuda_entry::make_collectives(std::shared_ptr<DeviceSet> devices) {
  return std::make_unique<CudaCollectives>(std::move(devices));
}

}  // namespace dpv
