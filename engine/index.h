#pragma once
// Index casts written once. The engine counts elements, rows and ranks in int64_t (as PyTorch's
// sizes are), while std::vector and size_t-sized buffers take size_t: ix(i) is that conversion,
// checked, so a negative index is an error naming itself instead of a wrapped 2^64 - i.
//   std::vector<double> sum(ix(C));   flow[ix(j)] = ...;
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "engine/error.h"

namespace dpv {

template <typename Int>
constexpr size_t ix(Int i) {
  static_assert(std::is_integral_v<Int>, "ix() converts integer indices and counts");
  if constexpr (std::is_signed_v<Int>) {
    if (i < 0) [[unlikely]]
      throw Error("internal error: negative index or count " + std::to_string(i) + " used as a size");
  }
  return static_cast<size_t>(i);
}

}  // namespace dpv
