#pragma once
// How far a communication hook's averaged gradients are from the exact average of the SAME raw
// gradients (what DDP without a hook, or allreduce_hook, gives): the price of the bytes a
// compressing hook saves. A probed iteration (Reducer::set_hook_error_probe) keeps a copy of each
// raw bucket before the hook, runs the hook as usual, then all-reduces the copy's mean
// (allreduce_mean) and compares element by element. The probe works on copies only: the hook's
// own state (PowerSGD's error feedback and Q) and the gradients the step uses are those of an
// unprobed run, bit for bit; only the probed iteration's timing carries one extra all-reduce.
#include <cstdint>

#include "engine/ddp/comm_hooks/comm_hook.h"

namespace dpv {

// Sums over every element of one iteration's gradient (all buckets), in double.
struct HookErrorMeasure {
  double error_sq = 0;  // sum of (hooked - exact)^2
  double exact_sq = 0;  // sum of exact^2
  double max_abs = 0;   // the largest |hooked - exact|
  int64_t elements = 0;
  // sqrt(error_sq / exact_sq): 0 for an exact hook; infinity when the exact gradient is all zeros
  // and the hook's is not.
  double relative_l2() const;
  // Adds another bucket's (or the same iteration's other buckets') sums.
  void add(const HookErrorMeasure& other);
  bool operator==(const HookErrorMeasure&) const = default;
};

// The sums of (hooked - exact) over two tensors of the same numel on host memory (float32 or float64).
// Throws dpv::Error when they differ in size.
HookErrorMeasure compare_to_exact(const Tensor& hooked, const Tensor& exact);

// After the hook ran on `hooked` (its buffer now the hook's average): all-reduces the mean of
// `raw_copy` (the bucket as it was before the hook, consumed) and compares. A collective: every
// rank probes the same buckets in the same order.
HookErrorMeasure measure_hook_error(const GradBucket& hooked, Tensor raw_copy, ProcessGroup& group);

}  // namespace dpv
