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

// The run loops below are always inlined, so that the caller's vector clones (cpu_batchnorm.cpp's
// DPV_VECTOR_CLONES) compile them for AVX2 / AVX-512 too: out of line they ran as baseline SSE2
// code, one or two doubles per instruction.
#define DPV_RUN_LOOP [[gnu::always_inline]] inline

// acc += sum of p[0..n)
template <typename Acc, typename T>
DPV_RUN_LOOP void add_run(Lanes<Acc>& acc, const T* p, int64_t n) {
  int64_t s = 0;
  for (; s + kLanes <= n; s += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) acc.v[j] += static_cast<Acc>(p[s + j]);
  for (; s < n; ++s) acc.v[s % kLanes] += static_cast<Acc>(p[s]);
}

// acc += sum of (p - m)^2 over p[0..n)
template <typename T>
DPV_RUN_LOOP void add_squared_deviations(Lanes<double>& acc, const T* p, int64_t n, double m) {
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

// kLanes values as one vector (GCC/Clang vector extensions): lane j of an operation is the
// arithmetic on element j, so a loop over these computes exactly what the scalar lane loop does,
// in whatever vector registers the clone has (AVX-512: one register of doubles).
// These are always inlined, never called, so GCC's -Wpsabi note (a 64-byte vector returned by
// value is passed differently with and without AVX-512) does not apply: the file that builds
// vector clones of these loops turns it off.
static_assert(kLanes == 8, "the lane vectors below hold 8 values");
template <typename T>
struct LaneVecOf;
template <>
struct LaneVecOf<float> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct LaneVecOf<double> {
  typedef double type __attribute__((vector_size(64)));
};
template <>
struct LaneVecOf<int64_t> {
  typedef int64_t type __attribute__((vector_size(64)));
};
template <typename T>
using LaneVec = typename LaneVecOf<T>::type;
using DoubleLanes = LaneVec<double>;

// p[0..kLanes) widened to double.
template <typename T>
DPV_RUN_LOOP DoubleLanes load_widened(const T* p) {
  LaneVec<T> v;
  __builtin_memcpy(&v, p, sizeof v);
  return __builtin_convertvector(v, DoubleLanes);
}

// K channels' runs at once (p[k]: channel k's run of n values, m[k]: its mean): acc[k] gains
// exactly what add_run (sum) or add_squared_deviations (sq) adds for that run alone, in the same
// order, but the K chains of vector additions are independent, so the core overlaps them: one
// chain waits on each addition's latency (4 cycles per 8 values with AVX-512).
template <int K, typename T>
DPV_RUN_LOOP void add_runs(Lanes<double> (&acc)[K], const T* const (&p)[K], int64_t n) {
  DoubleLanes v[K];
  for (int k = 0; k < K; ++k) __builtin_memcpy(&v[k], acc[k].v, sizeof v[k]);
  int64_t s = 0;
  for (; s + kLanes <= n; s += kLanes)
    for (int k = 0; k < K; ++k) v[k] += load_widened(p[k] + s);
  for (int k = 0; k < K; ++k) __builtin_memcpy(acc[k].v, &v[k], sizeof v[k]);
  for (; s < n; ++s)
    for (int k = 0; k < K; ++k) acc[k].v[s % kLanes] += static_cast<double>(p[k][s]);
}
template <int K, typename T>
DPV_RUN_LOOP void add_squared_deviations_runs(Lanes<double> (&acc)[K], const T* const (&p)[K], int64_t n,
                                              const double (&m)[K]) {
  DoubleLanes v[K], mv[K];
  for (int k = 0; k < K; ++k) {
    __builtin_memcpy(&v[k], acc[k].v, sizeof v[k]);
    mv[k] = DoubleLanes{} + m[k];
  }
  int64_t s = 0;
  for (; s + kLanes <= n; s += kLanes)
    for (int k = 0; k < K; ++k) {
      const DoubleLanes d = load_widened(p[k] + s) - mv[k];
      v[k] += d * d;
    }
  for (int k = 0; k < K; ++k) __builtin_memcpy(acc[k].v, &v[k], sizeof v[k]);
  for (; s < n; ++s)
    for (int k = 0; k < K; ++k) {
      const double d = static_cast<double>(p[k][s]) - m[k];
      acc[k].v[s % kLanes] += d * d;
    }
}

// The gradient BatchNorm's backward reduces over a run: dy itself, or, when a ReLU followed the
// BatchNorm in the same pass, ReLU's backward of it (0 where the ReLU's output y <= 0), computed on
// the fly instead of being written out and read back. In double: masking the widened values gives
// the same double as masking in T and then widening.
template <typename T>
struct PlainGrad {
  const T* dy;
  double operator()(int64_t s) const { return static_cast<double>(dy[s]); }
  DPV_RUN_LOOP DoubleLanes lanes(int64_t s) const { return load_widened(dy + s); }
};
template <typename T>
struct ReluMaskedGrad {
  const T* dy;
  const T* y;  // the ReLU's output
  double operator()(int64_t s) const {
    return kernels::math::relu_backward(static_cast<double>(y[s]), static_cast<double>(dy[s]));
  }
  // relu_backward per lane, as a bit mask (+0.0 where y <= 0, dy's bits elsewhere, NaN y included):
  // written with ?: GCC compared and moved lane by lane.
  DPV_RUN_LOOP DoubleLanes lanes(int64_t s) const {
    using Bits = LaneVec<int64_t>;
    const Bits dropped = load_widened(y + s) <= 0.0;  // all ones where y <= 0
    return (DoubleLanes)(~dropped & (Bits)load_widened(dy + s));
  }
};

// sum_dy += sum of g, sum_dy_xmu += sum of g * (x - m) over n values (g: one of the above).
template <typename T, typename Grad>
DPV_RUN_LOOP void add_backward_terms(Lanes<double>& sum_dy, Lanes<double>& sum_dy_xmu, const Grad& grad, const T* x,
                                     int64_t n, double m) {
  DoubleLanes sdy, sdxm;
  __builtin_memcpy(&sdy, sum_dy.v, sizeof sdy);
  __builtin_memcpy(&sdxm, sum_dy_xmu.v, sizeof sdxm);
  const DoubleLanes mv = DoubleLanes{} + m;
  int64_t s = 0;
  for (; s + kLanes <= n; s += kLanes) {
    const DoubleLanes g = grad.lanes(s);
    sdy += g;
    sdxm += g * (load_widened(x + s) - mv);
  }
  __builtin_memcpy(sum_dy.v, &sdy, sizeof sdy);
  __builtin_memcpy(sum_dy_xmu.v, &sdxm, sizeof sdxm);
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
