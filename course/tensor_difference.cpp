#include "course/tensor_difference.h"

#include <algorithm>
#include <cmath>

namespace dpv::course {

std::optional<double> max_abs_difference(const TensorMap& a, const TensorMap& b, const std::vector<std::string>& names) {
  std::optional<double> worst;
  for (const auto& name : names) {
    const Tensor* x = a.find(name);
    const Tensor* y = b.find(name);
    // An empty pair has no difference to report (not even 0).
    if (!x || !y || !x->defined() || !y->defined() || x->numel() != y->numel() || x->numel() == 0) continue;
    const std::vector<double> xs = x->to_doubles(), ys = y->to_doubles();
    double here = 0;
    for (size_t i = 0; i < xs.size(); ++i) here = std::max(here, std::fabs(xs[i] - ys[i]));
    worst = std::max(worst.value_or(0.0), here);
  }
  return worst;
}

}  // namespace dpv::course
