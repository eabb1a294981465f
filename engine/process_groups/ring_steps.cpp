// One ring all-reduce step's chunks and its receive (see ring_steps.h).
#include "engine/process_groups/ring_steps.h"

#include <type_traits>

#include "engine/backend.h"
#include "engine/device.h"
#include "engine/error.h"
#include "kernels/math/elementwise.h"

namespace dpv {

namespace {
int mod(int a, int w) { return ((a % w) + w) % w; }

// dst += src for two equal-sized flat views. Host-readable memory is added in place; other devices
// copy the neighbour's chunk over first (the peer copy) and add on the receiving device.
void add_chunk(Tensor dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.on_host_memory() && src.on_host_memory()) {
    const int64_t n = dst.numel();
    switch (dst.dtype()) {
      case DType::Float32: {
        float* d = dst.data<float>();
        const float* s = src.data<float>();
        for (int64_t i = 0; i < n; ++i) d[i] += s[i];
        return;
      }
      case DType::Float64: {
        double* d = dst.data<double>();
        const double* s = src.data<double>();
        for (int64_t i = 0; i < n; ++i) d[i] += s[i];
        return;
      }
      case DType::Int64: {
        int64_t* d = dst.data<int64_t>();
        const int64_t* s = src.data<int64_t>();
        for (int64_t i = 0; i < n; ++i) d[i] += s[i];
        return;
      }
    }
  }
  Tensor received = Tensor::empty(dst.shape(), dst.dtype(), dst.device_ptr());
  received.copy_from(src);
  dst.device()->backend().add_inplace(dst, received);
}
// dst = dst + src, or with a premultiply p: dst = p*dst + p*src (first step) or p*dst + src, with
// p*x as the backend's scale_inplace rounds it (kernels/math/elementwise.h: in T, with p converted
// to T once). kForward: each result is also stored in `forward`, which is `src` itself when world = 2
// (each element is read before it is written).
template <typename T, bool kForward>
void add_received(T* dst, const T* src, T* forward, int64_t n, double premultiply, bool first_step) {
  namespace math = kernels::math;
  auto put = [&](int64_t i, T value) {
    dst[i] = value;
    if constexpr (kForward) forward[i] = value;
  };
  if (premultiply == 1.0) {
    for (int64_t i = 0; i < n; ++i) put(i, dst[i] + src[i]);
    return;
  }
  const T p = static_cast<T>(premultiply);
  if (first_step)
    for (int64_t i = 0; i < n; ++i) put(i, math::scale(dst[i], p) + math::scale(src[i], p));
  else
    for (int64_t i = 0; i < n; ++i) put(i, math::scale(dst[i], p) + src[i]);
}

// The reduce-scatter receive on host memory, of ring_receive_premultiplied (successor null) and
// ring_receive_and_forward.
void receive_on_host(int step, Tensor& mine, const Tensor& from, Tensor* successor, int recv_chunk,
                     const std::vector<int64_t>& offsets, double premultiply) {
  const int64_t begin = offsets[static_cast<size_t>(recv_chunk)], end = offsets[static_cast<size_t>(recv_chunk) + 1];
  Tensor dst = mine.slice0(begin, end);
  const Tensor src = from.slice0(begin, end);
  Tensor forward = successor ? successor->slice0(begin, end) : Tensor();
  check(dst.on_host_memory() && src.on_host_memory() && (!successor || forward.on_host_memory()),
        "a premultiplied or forwarding ring step runs on host memory only");
  auto add = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (successor)
      add_received<T, true>(dst.data<T>(), src.data<T>(), forward.data<T>(), dst.numel(), premultiply, step == 0);
    else
      add_received<T, false>(dst.data<T>(), src.data<T>(), nullptr, dst.numel(), premultiply, step == 0);
  };
  switch (dst.dtype()) {
    case DType::Float32: add(static_cast<float*>(nullptr)); return;
    case DType::Float64: add(static_cast<double*>(nullptr)); return;
    case DType::Int64:
      check(premultiply == 1.0, "a premultiplied ring sum needs floating-point values, got int64");
      add(static_cast<int64_t*>(nullptr));
      return;
  }
}
}  // namespace

void ring_receive_and_forward(int step, Tensor& mine, const Tensor& from, Tensor& successor, int recv_chunk,
                              const std::vector<int64_t>& offsets, double premultiply) {
  receive_on_host(step, mine, from, &successor, recv_chunk, offsets, premultiply);
}

void ring_receive_premultiplied(int step, Tensor& mine, const Tensor& from, int recv_chunk,
                                const std::vector<int64_t>& offsets, double premultiply) {
  receive_on_host(step, mine, from, nullptr, recv_chunk, offsets, premultiply);
}

void premultiply_in_place(Tensor& buf, double premultiply) {
  check(buf.on_host_memory(), "a premultiplied ring sum runs on host memory only");
  namespace math = kernels::math;
  auto scale_all = [&](auto* data) {
    using T = std::remove_pointer_t<decltype(data)>;
    const T p = static_cast<T>(premultiply);
    for (int64_t i = 0, n = buf.numel(); i < n; ++i) data[i] = math::scale(data[i], p);
  };
  switch (buf.dtype()) {
    case DType::Float32: scale_all(buf.data<float>()); return;
    case DType::Float64: scale_all(buf.data<double>()); return;
    case DType::Int64: throw Error("a premultiplied ring sum needs floating-point values, got int64");
  }
}

RingMove ring_move(int phase, int rank, int step, int world_size, RingSchedule schedule) {
  const int shift = schedule == RingSchedule::RankOwnsItsChunk ? -1 : 0;
  if (phase == 0) return {mod(rank - step + shift, world_size), mod(rank - 1 - step + shift, world_size)};
  return {mod(rank + 1 - step + shift, world_size), mod(rank - step + shift, world_size)};
}

void ring_receive(int phase, Tensor& mine, const Tensor& from, int recv_chunk, const std::vector<int64_t>& offsets) {
  const int64_t begin = offsets[static_cast<size_t>(recv_chunk)], end = offsets[static_cast<size_t>(recv_chunk) + 1];
  Tensor dst = mine.slice0(begin, end);
  const Tensor src = from.slice0(begin, end);
  if (phase == 0)
    add_chunk(dst, src);
  else
    dst.copy_from(src);
}

}  // namespace dpv
