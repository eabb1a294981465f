#pragma once
// Per-channel sums of the CPU backend (sum_channels, BatchNorm's statistics and backward) and the
// per-thread scratch its per-channel loops use.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/math/elementwise.h"

namespace dpv::cpu {

// Sums over a channel's run of values with kLanes independent accumulators: one accumulator is a
// chain of dependent additions (4 cycles each), several are summed in parallel and vectorise.
// The lanes are combined in a fixed order, so results do not depend on timing.
constexpr int64_t kLanes = 8;

template <typename Acc>
struct Lanes {
  Acc v[kLanes] = {};
  Acc total() const {
    Acc t = 0;
    for (int64_t j = 0; j < kLanes; ++j) t += v[j];
    return t;
  }
};

// acc += sum of p[0..n)
template <typename Acc, typename T>
void add_run(Lanes<Acc>& acc, const T* p, int64_t n) {
  int64_t s = 0;
  for (; s + kLanes <= n; s += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) acc.v[j] += static_cast<Acc>(p[s + j]);
  for (; s < n; ++s) acc.v[s % kLanes] += static_cast<Acc>(p[s]);
}

// acc += sum of (p - m)^2 over p[0..n)
template <typename T>
void add_squared_deviations(Lanes<double>& acc, const T* p, int64_t n, double m) {
  int64_t s = 0;
  for (; s + kLanes <= n; s += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) {
      const double d = static_cast<double>(p[s + j]) - m;
      acc.v[j] += d * d;
    }
  for (; s < n; ++s) {
    const double d = static_cast<double>(p[s]) - m;
    acc.v[s % kLanes] += d * d;
  }
}

// The gradient BatchNorm's backward reduces over a run: dy itself, or, when a ReLU followed the
// BatchNorm in the same pass, ReLU's backward of it (0 where the ReLU's output y <= 0), computed on
// the fly instead of being written out and read back.
template <typename T>
struct PlainGrad {
  const T* dy;
  T operator()(int64_t s) const { return dy[s]; }
};
template <typename T>
struct ReluMaskedGrad {
  const T* dy;
  const T* y;  // the ReLU's output
  T operator()(int64_t s) const { return kernels::math::relu_backward(y[s], dy[s]); }
};

// sum_dy += sum of g, sum_dy_xmu += sum of g * (x - m) over n values (g: one of the above).
template <typename T, typename Grad>
void add_backward_terms(Lanes<double>& sum_dy, Lanes<double>& sum_dy_xmu, const Grad& grad, const T* x, int64_t n,
                        double m) {
  int64_t s = 0;
  for (; s + kLanes <= n; s += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) {
      const double g = grad(s + j);
      sum_dy.v[j] += g;
      sum_dy_xmu.v[j] += g * (static_cast<double>(x[s + j]) - m);
    }
  for (; s < n; ++s) {
    const double g = grad(s);
    sum_dy.v[s % kLanes] += g;
    sum_dy_xmu.v[s % kLanes] += g * (static_cast<double>(x[s]) - m);
  }
}

// Per-thread scratch for per-channel values ([C] sums, folded affine terms), grown on first use
// and reused: every simulated device runs on its own long-lived thread, so a steady training step
// allocates nothing here. `slot` keeps the buffers one op uses at once apart (0..kScratchSlots-1).
constexpr int kScratchSlots = 4;
template <typename U>
U* channel_scratch(int slot, int64_t count) {
  thread_local std::vector<std::max_align_t> buffers[kScratchSlots];
  auto& b = buffers[slot];
  const size_t words = (static_cast<size_t>(count) * sizeof(U) + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
  if (b.size() < words) b.resize(words);
  return reinterpret_cast<U*>(b.data());
}

}  // namespace dpv::cpu
