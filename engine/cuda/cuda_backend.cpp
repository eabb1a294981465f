// The CUDA backend: memory (stream-ordered cudaMallocAsync), copies, the event clock, cuBLAS
// matrix products and the element-wise and convolution kernels. Batch norm, the loss and the
// optimizer are in cuda_backend_norm.cpp.
#include "engine/dtype_dispatch.h"
#include "engine/cuda/cuda_backend.h"

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>

#include "engine/cuda/cuda_check.h"
#include "engine/error.h"
#include "kernels/add_channel_bias.h"
#include "kernels/add_inplace.h"
#include "kernels/addcmul_inplace.h"
#include "kernels/fill.h"
#include "kernels/im2col.h"
#include "kernels/math/gemm_mapping.h"
#include "kernels/permute_nos.h"
#include "kernels/relu.h"
#include "kernels/scale_inplace.h"
#include "kernels/sum_channels.h"

namespace dpv {

namespace {

double steady_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

std::string gib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// A memory pool of one device (one virtual slot): freed blocks stay in it instead of going back to
// the driver at every synchronisation, so a training loop reuses its memory the way PyTorch's
// caching allocator does, and only this slot's streams reuse them.
cudaMemPool_t make_slot_pool(int ordinal) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = ordinal;
  cudaMemPool_t pool = nullptr;
  DPV_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
  uint64_t threshold = UINT64_MAX;
  DPV_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  return pool;
}

// The thread's current queue per device (run_on_queue), innermost last.
struct CurrentQueue {
  const CudaBackend* backend;
  DeviceQueue queue;
};
std::vector<CurrentQueue>& current_queues() {
  thread_local std::vector<CurrentQueue> queues;
  return queues;
}

// A CUDA event recorded on one of the device's streams (no timing: ordering only).
class CudaQueueEvent final : public QueueEvent {
 public:
  CudaQueueEvent() {
    DPV_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  }
  // cudaEventDestroy needs no current device: the thread's current GPU stays what it was.
  ~CudaQueueEvent() override {
    if (cudaEventDestroy(event_) != cudaSuccess) cudaGetLastError();
  }
  CudaQueueEvent(const CudaQueueEvent&) = delete;
  CudaQueueEvent& operator=(const CudaQueueEvent&) = delete;
  cudaEvent_t event() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace

CudaBackend::CudaBackend(int ordinal, int slot) : ordinal_(ordinal), slot_(slot) {
  activate();
  pool_ = make_slot_pool(ordinal_);
  DPV_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  DPV_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
  DPV_CUDA_CHECK(cublasCreate(&blas_));
  DPV_CUDA_CHECK(cublasSetStream(blas_, stream()));
  // Full float32 products (no TF32), as PyTorch's default allow_tf32 = False for matmul.
  DPV_CUDA_CHECK(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));
  DPV_CUDA_CHECK(cudaEventCreate(&anchor_));
  DPV_CUDA_CHECK(cudaEventCreate(&tick_));
  DPV_CUDA_CHECK(cudaEventRecord(anchor_, stream()));
  DPV_CUDA_CHECK(cudaEventSynchronize(anchor_));
  anchor_seconds_ = steady_seconds();
  DPV_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_info_), 2 * sizeof(int64_t)));
}

CudaBackend::~CudaBackend() {
  // Destructors must not throw: errors here (a GPU already in a failed state) are ignored.
  cudaSetDevice(ordinal_);
  if (stream_) cudaStreamSynchronize(stream_);
  if (comm_stream_) cudaStreamSynchronize(comm_stream_);
  if (host_info_) cudaFreeHost(host_info_);
  if (anchor_) cudaEventDestroy(anchor_);
  if (tick_) cudaEventDestroy(tick_);
  if (blas_) cublasDestroy(blas_);
  if (comm_stream_) cudaStreamDestroy(comm_stream_);
  if (stream_) cudaStreamDestroy(stream_);
  if (pool_) cudaMemPoolDestroy(pool_);
  cudaGetLastError();
}

void CudaBackend::activate() const { DPV_CUDA_CHECK(cudaSetDevice(ordinal_)); }

cudaStream_t CudaBackend::stream() const {
  const auto& queues = current_queues();
  for (auto it = queues.rbegin(); it != queues.rend(); ++it)
    if (it->backend == this) return stream_of(it->queue);
  return stream_;
}

std::shared_ptr<QueueEvent> CudaBackend::record_event(DeviceQueue queue) {
  activate();
  auto event = std::make_shared<CudaQueueEvent>();
  DPV_CUDA_CHECK(cudaEventRecord(event->event(), stream_of(queue)));
  return event;
}

void CudaBackend::queue_wait(DeviceQueue queue, const std::shared_ptr<QueueEvent>& event) {
  if (!event) return;
  const auto* cuda_event = dynamic_cast<const CudaQueueEvent*>(event.get());
  if (!cuda_event) throw Error("a CUDA stream can wait only for a CUDA event, on " + where());
  activate();
  // The wait is captured now: the event may be destroyed once this returns.
  DPV_CUDA_CHECK(cudaStreamWaitEvent(stream_of(queue), cuda_event->event(), 0));
}

void CudaBackend::run_on_queue(DeviceQueue queue, const std::function<void()>& fn) {
  auto& queues = current_queues();
  const size_t depth = queues.size();
  queues.push_back({this, queue});
  try {
    fn();
  } catch (...) {
    queues.resize(depth);
    throw;
  }
  queues.resize(depth);
}

void CudaBackend::synchronize_all() {
  activate();
  DPV_CUDA_CHECK(cudaStreamSynchronize(stream_));
  DPV_CUDA_CHECK(cudaStreamSynchronize(comm_stream_));
}

std::string CudaBackend::where() const {
  return "cuda:" + std::to_string(ordinal_) + " (device " + std::to_string(slot_) + ")";
}

CudaBackend* CudaBackend::of(const Device* device) {
  if (!device || device->kind() != DeviceKind::Cuda) return nullptr;
  return dynamic_cast<CudaBackend*>(&device->backend());
}

void CudaBackend::expect(const Tensor& t, const char* op, const char* name, DType dtype, int64_t numel) const {
  if (!t.defined()) throw Error(std::string(op) + ": " + name + " is not defined");
  if (t.dtype() != dtype)
    throw Error(std::string(op) + ": expected " + name + " of dtype " + dtype_name(dtype) + " but got " +
                dtype_name(t.dtype()));
  const CudaBackend* owner = of(t.device());
  if (owner != this)
    throw Error(std::string(op) + ": expected " + name + " on " + where() + " but it is on " + t.device_name());
  if (t.numel() < numel)
    throw Error(std::string(op) + ": " + name + " " + shape_str(t.shape()) + " holds " + std::to_string(t.numel()) +
                " elements, fewer than the " + std::to_string(numel) + " the operation needs");
}

// --- memory

void* CudaBackend::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  activate();
  void* ptr = nullptr;
  cudaError_t status = cudaMallocFromPoolAsync(&ptr, bytes, pool_, stream());
  if (status == cudaErrorMemoryAllocation) {
    // Blocks freed on other streams (and other slots' cached blocks) are reusable once those frees
    // are done and handed back: wait, trim every pool of the GPU, retry once.
    cudaGetLastError();
    cudaDeviceSynchronize();
    cudaMemPoolTrimTo(pool_, 0);
    cudaMemPool_t pool = nullptr;
    if (cudaDeviceGetDefaultMemPool(&pool, ordinal_) == cudaSuccess) cudaMemPoolTrimTo(pool, 0);
    status = cudaMallocFromPoolAsync(&ptr, bytes, pool_, stream());
  }
  size_t free_bytes = 0, total_bytes = 0;
  if (status != cudaSuccess) {
    cudaGetLastError();
    cudaMemGetInfo(&free_bytes, &total_bytes);
    cudaGetLastError();
  }
  // A request beyond the GPU's whole memory may fail as cudaErrorInvalidValue instead of
  // cudaErrorMemoryAllocation: both are the same error to the user.
  if (status == cudaErrorMemoryAllocation || (status == cudaErrorInvalidValue && bytes > total_bytes)) {
    throw Error("CUDA out of memory on " + where() + ": tried to allocate " + gib(bytes) + "; the GPU has " +
                    gib(free_bytes) + " free of " + gib(total_bytes) +
                    " (use a smaller batch or model, or fewer virtual devices)",
                ErrorClass::OutOfMemoryError, ErrorReason::OutOfMemory);
  }
  DPV_CUDA_CHECK(status);
  return ptr;
}

void CudaBackend::release(void* ptr, size_t) {
  // Called from Storage's destructor: report nothing, throw nothing. The free is ordered after
  // the work already queued on this stream.
  if (!ptr) return;
  if (cudaSetDevice(ordinal_) != cudaSuccess || cudaFreeAsync(ptr, stream()) != cudaSuccess) cudaGetLastError();
}

void CudaBackend::copy(void* dst, const Device* dst_device, const void* src, const Device* src_device,
                       size_t bytes) {
  if (bytes == 0) return;
  CudaBackend* to = of(dst_device);
  CudaBackend* from = of(src_device);
  if (!to && !from) {  // both in host memory (host tensors or simulated CPU devices)
    std::memcpy(dst, src, bytes);
    return;
  }
  // Work queued on the other device must be done before its bytes are read or overwritten. From
  // this device's communication queue (the in-process ring reading a peer's bucket) that is the
  // peer's communication stream: the peer queued its wait for the bucket's compute event there
  // before it posted the bucket, and its ring additions run there; its compute stream goes on with
  // the backward. From the compute queue, both of the other device's streams.
  const cudaStream_t s = stream();
  const bool from_comm = s == comm_stream_;
  for (CudaBackend* other : {from, to}) {
    if (!other || other == this) continue;
    if (from_comm) {
      other->activate();
      DPV_CUDA_CHECK(cudaStreamSynchronize(other->comm_stream_));
    } else {
      other->synchronize_all();
    }
  }
  activate();
  if (to && from) {
    if (to->ordinal_ == from->ordinal_)
      DPV_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    else
      DPV_CUDA_CHECK(cudaMemcpyPeerAsync(dst, to->ordinal_, src, from->ordinal_, bytes, s));
  } else {
    DPV_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, to ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s));
  }
  // Synchronous for the caller: host data is readable and the source may be reused on return.
  DPV_CUDA_CHECK(cudaStreamSynchronize(s));
}

void CudaBackend::fill(Tensor& t, double value) {
  expect(t, "fill", "tensor", t.dtype(), t.numel());
  activate();
  const int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::Float32: DPV_CUDA_CHECK(kernels::fill(t.data<float>(), n, value, stream())); break;
    case DType::Float64: DPV_CUDA_CHECK(kernels::fill(t.data<double>(), n, value, stream())); break;
    case DType::Int64: DPV_CUDA_CHECK(kernels::fill(t.data<int64_t>(), n, value, stream())); break;
  }
}

void CudaBackend::synchronize() {
  activate();
  DPV_CUDA_CHECK(cudaStreamSynchronize(stream()));
}

double CudaBackend::now() {
  std::lock_guard<std::mutex> lock(clock_mutex_);
  activate();
  DPV_CUDA_CHECK(cudaEventRecord(tick_, stream()));
  DPV_CUDA_CHECK(cudaEventSynchronize(tick_));
  float ms = 0;
  DPV_CUDA_CHECK(cudaEventElapsedTime(&ms, anchor_, tick_));
  anchor_seconds_ += static_cast<double>(ms) / 1000.0;
  std::swap(anchor_, tick_);
  return anchor_seconds_;
}

// --- dense algebra

namespace {

int blas_int(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX) throw Error(std::string("gemm: ") + what + " = " + std::to_string(v) + " is beyond cuBLAS's int range");
  return static_cast<int>(v);
}

}  // namespace

void CudaBackend::gemm(bool trans_a, bool trans_b, int64_t rows, int64_t cols, int64_t inner, double alpha, const Tensor& a,
                       const Tensor& b, double beta, Tensor& c) {
  const DType dt = c.dtype();
  expect(c, "gemm", "c", dt, rows * cols);
  if (rows == 0 || cols == 0) return;
  if (inner == 0) {  // as the CPU backend: C = beta * C, zeros for beta = 0 (math::scale)
    scale_inplace(c, beta);
    return;
  }
  expect(a, "gemm", "a", dt, rows * inner);
  expect(b, "gemm", "b", dt, inner * cols);
  activate();
  // The mapping is kernels/math/gemm_mapping.h, tested on the CPU against a naive GEMM.
  const kernels::math::ColumnMajorGemm map = kernels::math::column_major_gemm(trans_a, trans_b, rows, cols, inner);
  const cublasOperation_t op_first = map.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = map.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = blas_int(map.m, "cols"), n = blas_int(map.n, "rows"), k = blas_int(map.k, "inner");
  const int ld_first = blas_int(map.ld_first, "ldb"), ld_second = blas_int(map.ld_second, "lda");
  const int ldc = blas_int(map.ldc, "ldc");
  std::lock_guard<std::mutex> lock(blas_mutex_);
  DPV_CUDA_CHECK(cublasSetStream(blas_, stream()));  // the calling thread's queue
  if (dt == DType::Float32) {
    const float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
    DPV_CUDA_CHECK(cublasSgemm(blas_, op_first, op_second, m, n, k, &fa, b.data<float>(), ld_first, a.data<float>(),
                               ld_second, &fb, c.data<float>(), ldc));
  } else if (dt == DType::Float64) {
    DPV_CUDA_CHECK(cublasDgemm(blas_, op_first, op_second, m, n, k, &alpha, b.data<double>(), ld_first,
                               a.data<double>(), ld_second, &beta, c.data<double>(), ldc));
  } else {
    throw Error("gemm expects float32 or float64 tensors, got int64");
  }
}

void CudaBackend::add_channel_bias(Tensor& y, const Tensor& bias, int64_t N, int64_t C, int64_t S) {
  expect(y, "add_channel_bias", "y", y.dtype(), N * C * S);
  expect(bias, "add_channel_bias", "bias", y.dtype(), C);
  activate();
  dispatch_float(y.dtype(), "add_channel_bias", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::add_channel_bias(y.data<T>(), bias.data<T>(), N, C, S, stream()));
  });
}

void CudaBackend::sum_channels(const Tensor& dy, Tensor& out, int64_t N, int64_t C, int64_t S, bool accumulate) {
  expect(dy, "sum_channels", "dy", dy.dtype(), N * C * S);
  expect(out, "sum_channels", "out", dy.dtype(), C);
  activate();
  dispatch_float(dy.dtype(), "sum_channels", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::sum_channels(dy.data<T>(), out.data<T>(), N, C, S, accumulate, stream()));
  });
}

void CudaBackend::add_inplace(Tensor& dst, const Tensor& src) {
  expect(dst, "add_", "dst", dst.dtype(), src.numel());
  expect(src, "add_", "src", dst.dtype(), dst.numel());
  activate();
  const int64_t n = dst.numel();
  switch (dst.dtype()) {
    case DType::Float32: DPV_CUDA_CHECK(kernels::add_inplace(dst.data<float>(), src.data<float>(), n, stream())); break;
    case DType::Float64: DPV_CUDA_CHECK(kernels::add_inplace(dst.data<double>(), src.data<double>(), n, stream())); break;
    case DType::Int64: DPV_CUDA_CHECK(kernels::add_inplace(dst.data<int64_t>(), src.data<int64_t>(), n, stream())); break;
  }
}

void CudaBackend::addcmul_inplace(Tensor& dst, const Tensor& a, const Tensor& b) {
  expect(dst, "addcmul_", "self", dst.dtype(), a.numel());
  expect(a, "addcmul_", "tensor1", dst.dtype(), dst.numel());
  expect(b, "addcmul_", "tensor2", dst.dtype(), dst.numel());
  activate();
  dispatch_float(dst.dtype(), "addcmul_", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::addcmul_inplace(dst.data<T>(), a.data<T>(), b.data<T>(), dst.numel(), stream()));
  });
}

void CudaBackend::scale_inplace(Tensor& dst, double alpha) {
  expect(dst, "mul_", "dst", dst.dtype(), dst.numel());
  activate();
  dispatch_float(dst.dtype(), "mul_", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::scale_inplace(dst.data<T>(), dst.numel(), alpha, stream()));
  });
}

// --- activations

void CudaBackend::relu_forward(const Tensor& x, Tensor& y) {
  expect(x, "relu", "x", x.dtype(), y.numel());
  expect(y, "relu", "y", x.dtype(), x.numel());
  activate();
  dispatch_float(x.dtype(), "relu", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::relu_forward(x.data<T>(), y.data<T>(), x.numel(), stream()));
  });
}

void CudaBackend::relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  expect(y, "threshold_backward", "y", y.dtype(), dx.numel());
  expect(dy, "threshold_backward", "dy", y.dtype(), dx.numel());
  expect(dx, "threshold_backward", "dx", y.dtype(), y.numel());
  activate();
  dispatch_float(y.dtype(), "threshold_backward", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::relu_backward(y.data<T>(), dy.data<T>(), dx.data<T>(), dx.numel(), stream()));
  });
}

// --- convolution helpers

void CudaBackend::im2col(const Tensor& x, Tensor& col, const ConvGeometry& g) {
  if (g.stride < 1) throw Error("im2col: stride must be at least 1");
  expect(x, "im2col", "x", x.dtype(), g.N * g.C * g.H * g.W);
  expect(col, "im2col", "col", x.dtype(), g.N * g.C * g.kh * g.kw * g.OH * g.OW);
  activate();
  dispatch_float(x.dtype(), "im2col", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::im2col(x.data<T>(), col.data<T>(), g, stream()));
  });
}

void CudaBackend::col2im(const Tensor& col, Tensor& dx, const ConvGeometry& g) {
  if (g.stride < 1) throw Error("col2im: stride must be at least 1");
  expect(col, "col2im", "col", col.dtype(), g.N * g.C * g.kh * g.kw * g.OH * g.OW);
  expect(dx, "col2im", "dx", col.dtype(), g.N * g.C * g.H * g.W);
  activate();
  dispatch_float(col.dtype(), "col2im", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::col2im(col.data<T>(), dx.data<T>(), g, stream()));
  });
}

void CudaBackend::permute_nos(const Tensor& src, Tensor& dst, int64_t A, int64_t B, int64_t S) {
  expect(src, "permute", "src", src.dtype(), A * B * S);
  expect(dst, "permute", "dst", src.dtype(), A * B * S);
  activate();
  dispatch_float(src.dtype(), "permute", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::permute_nos(src.data<T>(), dst.data<T>(), A, B, S, stream()));
  });
}

}  // namespace dpv
