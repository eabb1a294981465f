#pragma once
// Small text helpers shared by the dpv subcommands.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace dpv::cli {

// "[8, 8, 8, 8]", as Python prints a list.
template <typename T>
std::string list_str(const std::vector<T>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(values[i]);
  }
  return s + "]";
}

// printf-style formatting into a std::string.
template <typename... Args>
std::string strf(const char* format, Args... args) {
  int n = std::snprintf(nullptr, 0, format, args...);
  std::string s(static_cast<size_t>(n > 0 ? n : 0), '\0');
  std::snprintf(s.data(), s.size() + 1, format, args...);
  return s;
}

// f"{value:.{digits}f}" as Python prints it: "nan" where printf may print "-nan" (the sign of a
// NaN is meaningless, and PyTorch users see "nan"); inf and -inf as "inf" and "-inf".
inline std::string py_fixed(double value, int digits) {
  if (std::isnan(value)) return "nan";
  return strf("%.*f", digits, value);
}

}  // namespace dpv::cli
