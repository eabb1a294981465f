#pragma once
// Which library multiplies each float32 product on the CPU, from measurement rather than a fixed
// rule: the first product of a shape is timed with OpenBLAS and with oneDNN on its real operands,
// the faster is kept for that shape, and every later product of the shape uses it. Which library
// wins depends on the host (this machine's Debian OpenBLAS falls back to generic kernels; on others
// OpenBLAS wins some shapes), so nothing here guesses.
//
// The table is read by every device thread on every gemm: lookups take no lock (fixed slots that
// are only ever added or overwritten, published with release/acquire); only a shape's first
// product takes the mutex, to time it once however many threads meet it at the same moment.
//
// Private to the CPU backend; the front ends see the typed values of engine/core_backends.h.
#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/core_backends.h"

namespace dpv::cpu {

// Seconds one product of the shape takes with `library` (run on the real operands into scratch).
using GemmTimer = std::function<double(CpuGemmLibrary library)>;

// Below this many multiply-adds (rows * cols * inner) the two libraries differ by about 0.1 us per
// product, too little to time reliably or to ever matter, so such a product stays on OpenBLAS,
// untimed, whose fixed cost per call is the smaller one. Measured one thread, sgemm NT, best of 5 x
// 2000 calls (2026-12-05, this host): 8x8x8 OpenBLAS 0.17 us / oneDNN 0.26 us; 16x16x16 0.53 / 0.46;
// 32x32x16 1.58 / 0.70; 32x32x32 2.87 / 0.96; 64x64x64 27.8 / 5.6.
inline constexpr double kUntimedProduct = 1 << 12;

class GemmChooser {
 public:
  static constexpr int kRepeats = 3;                 // timed runs per library, the best counts
  static constexpr double kBudgetSeconds = 0.25;     // per shape: stop repeating once it is spent
  static constexpr size_t kSlots = 2048;             // shapes remembered (a run has a few dozen)

  GemmChooser(bool onednn_built, CpuGemmPin pin);
  CpuGemmPin pin() const { return pin_; }

  // The library for `shape`: the pin, the table's choice, OpenBLAS for an untimed product, or, the
  // first time, the faster one under `timer` (agreed through the installed sharing), then remembered.
  CpuGemmLibrary choose(const CpuGemmShape& shape, const GemmTimer& timer);
  // The remembered choice, without timing anything.
  std::optional<CpuGemmLibrary> chosen(const CpuGemmShape& shape) const;
  std::vector<CpuGemmChoice> choices() const;  // sorted by shape
  void set(const std::vector<CpuGemmChoice>& choices);
  void set_sharing(CpuGemmSharing* sharing);
  int shapes_timed() const { return timed_.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    std::atomic<bool> used{false};  // set once, after `shape`: readers that see it see the shape
    CpuGemmShape shape;
    std::atomic<CpuGemmLibrary> library{CpuGemmLibrary::OpenBlas};
  };
  const Slot* find(const CpuGemmShape& shape) const;
  void remember(const CpuGemmShape& shape, CpuGemmLibrary library);  // under mutex_
  bool timed(const CpuGemmShape& shape) const;

  bool onednn_built_;
  CpuGemmPin pin_;
  std::array<Slot, kSlots> slots_;
  mutable std::mutex mutex_;  // writers only: a first product's timing, set()
  CpuGemmSharing* sharing_ = nullptr;
  std::atomic<int> timed_{0};
};

// The faster library by `timer`: one untimed warm-up run each (oneDNN generates its kernel on a
// shape's first call), then up to `repeats` runs each, alternating, best of each, stopping early
// once `budget_seconds` are spent. A tie keeps OpenBLAS.
CpuGemmLibrary faster_library(const GemmTimer& timer, int repeats, double budget_seconds);

// The chooser every CPU backend of this process shares (DPV_GEMM read when it is made).
GemmChooser& process_gemm_chooser();
// Whether this build has oneDNN (defined in cpu_backend.cpp, the one file built with or without it).
bool built_with_onednn();
// DPV_GEMM's value as a pin; throws dpv::Error for anything else.
CpuGemmPin parse_gemm_pin(const char* value, bool onednn_built);

}  // namespace dpv::cpu
