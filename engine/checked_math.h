#pragma once
// Checked arithmetic for sizes. Shapes come from files and command lines, so a product or sum of
// sizes may not fit in int64: these say so instead of wrapping around (undefined behaviour that
// once trained a silently wrong model).
#include <cstdint>
#include <optional>
#include <string>

#include "engine/error.h"

namespace dpv {

// a * b and a + b, or nothing when the result does not fit in int64.
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}
// Chains: nothing in, nothing out.
inline std::optional<int64_t> checked_mul(std::optional<int64_t> a, int64_t b) {
  return a ? checked_mul(*a, b) : std::nullopt;
}
inline std::optional<int64_t> checked_add(std::optional<int64_t> a, std::optional<int64_t> b) {
  return a && b ? checked_add(*a, *b) : std::nullopt;
}

// The value, or dpv::Error (ValueError) "<what> is too large (it does not fit in 64 bits)".
inline int64_t size_or_throw(std::optional<int64_t> value, const std::string& what) {
  check(value.has_value(), what + " is too large (it does not fit in 64 bits)", ErrorClass::ValueError);
  return *value;
}

}  // namespace dpv
