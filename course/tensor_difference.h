#pragma once
// The one largest-difference measure between two runs' tensors (parameters, gradients), which
// the DP-vs-DDP comparison and the BatchNorm lab both plot.
#include <optional>
#include <string>
#include <vector>

#include "engine/tensor_map.h"

namespace dpv::course {

// max |a - b| over the tensors both maps hold under `names` with the same element count (the maps
// may live on devices); nullopt when no name is shared, for the caller to show as it shows "none".
std::optional<double> max_abs_difference(const TensorMap& a, const TensorMap& b, const std::vector<std::string>& names);

}  // namespace dpv::course
