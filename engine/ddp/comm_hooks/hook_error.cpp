// The hook error probe: the exact mean of a copy of the raw bucket beside the hook's result.
#include "engine/ddp/comm_hooks/hook_error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/error.h"

namespace dpv {

double HookErrorMeasure::relative_l2() const {
  if (error_sq == 0) return 0;
  if (exact_sq == 0) return std::numeric_limits<double>::infinity();
  return std::sqrt(error_sq / exact_sq);
}

void HookErrorMeasure::add(const HookErrorMeasure& other) {
  error_sq += other.error_sq;
  exact_sq += other.exact_sq;
  max_abs = std::max(max_abs, other.max_abs);
  elements += other.elements;
}

HookErrorMeasure compare_to_exact(const Tensor& hooked, const Tensor& exact) {
  check(hooked.numel() == exact.numel(), "hook error: the hooked bucket has " + std::to_string(hooked.numel()) +
                                             " elements and the exact one " + std::to_string(exact.numel()));
  // to_doubles reads float32 and float64 alike; a probed iteration is not timed, so the copies are
  // no concern.
  const std::vector<double> h = hooked.to_doubles();  // [numel]
  const std::vector<double> e = exact.to_doubles();   // [numel]
  HookErrorMeasure m;
  m.elements = static_cast<int64_t>(h.size());
  for (size_t i = 0; i < h.size(); ++i) {
    const double d = h[i] - e[i];
    m.error_sq += d * d;
    m.exact_sq += e[i] * e[i];
    m.max_abs = std::max(m.max_abs, std::abs(d));
  }
  return m;
}

HookErrorMeasure measure_hook_error(const GradBucket& hooked, Tensor raw_copy, ProcessGroup& group) {
  GradBucket exact{hooked.index, hooked.is_last, std::move(raw_copy), hooked.shapes, hooked.offsets};
  (void)allreduce_mean(exact, group);  // its collective is the probe's, not the step's: not reported
  return compare_to_exact(hooked.buffer, exact.buffer);
}

}  // namespace dpv
