// One ring all-reduce step's chunks and its receive (see ring_steps.h).
#include "engine/dist/ring_steps.h"

#include "engine/backend.h"
#include "engine/device.h"

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
}  // namespace

RingMove ring_move(int phase, int rank, int step, int world_size) {
  if (phase == 0) return {mod(rank - step, world_size), mod(rank - 1 - step, world_size)};
  return {mod(rank + 1 - step, world_size), mod(rank - step, world_size)};
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
