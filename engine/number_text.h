#pragma once
// Doubles as text that reads back as the same double, the one way the engine and its front ends
// write a number into a message, a file's metadata or a configuration they compare; a number with
// fixed decimals for tables and sentences; and a count with its noun ("1 bucket", "3 buckets").
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <string>

namespace dpv {

// The shortest text that reads back as the same double: "0.1", "25", "1e-08", "inf", "nan".
inline std::string shortest_text(double value) {
  if (value != value) return "nan";  // to_chars writes "-nan" for a NaN with its sign bit set
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, value);
  return ec == std::errc() ? std::string(text, end) : std::string("nan");
}

// As Python's repr prints a float, which PyTorch's own messages show: "1.0", "0.001", "1e-08", "-inf".
inline std::string python_float(double value) {
  std::string out = shortest_text(value);
  if (out.find_first_of(".ein") == std::string::npos) out += ".0";  // "1" -> "1.0"; not inf, nan, 1e-08
  return out;
}

// A number with a fixed count of decimals, as "%.*f" prints it: "72.5", "0.006". For text people
// read (tables, sentences), not for values read back (shortest_text).
inline std::string fixed_text(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// A number in scientific notation with `decimals` after the point, as "%.*e" prints it: "3.1e-04".
// For small relative errors people compare by their exponent.
inline std::string scientific_text(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*e", decimals, value);
  return text;
}

// "1 bucket", "3 buckets": a count and its noun, plural with an "s" unless the count is 1.
inline std::string count_text(int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

}  // namespace dpv
