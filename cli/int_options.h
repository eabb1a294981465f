#pragma once
// Integer options are read strictly: decimal digits only, and a value outside the option's range
// is refused with its name. CLI11's own conversion would clamp (strtoll turns
// 9223372036854775808 into 2^63-1, so `--steps` would run forever), read "-1" as 2^64-1 for an
// unsigned option, and take "010" as octal. Attach with ->transform(integer_in<T>(...)): a
// transform may rewrite the text (to canonical decimal); ->check() would hand the validator a copy.
#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <system_error>

#include <CLI/CLI.hpp>

namespace dpv::cli {

template <typename T>
CLI::Validator integer_in(T min = std::numeric_limits<T>::min(), T max = std::numeric_limits<T>::max()) {
  static_assert(std::is_integral_v<T>);
  const std::string range = std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [min, max, range](std::string& value) -> std::string {
        const char* begin = value.data();
        const char* end = begin + value.size();
        if (begin != end && *begin == '+') ++begin;
        T v{};
        const auto [stop, err] = std::from_chars(begin, end, v, 10);
        if (err == std::errc::result_out_of_range)
          return "must be from " + range + ", got " + value;
        if (err != std::errc() || stop != end || begin == end) {
          const bool negative_unsigned = std::is_unsigned_v<T> && !value.empty() && value.front() == '-';
          return negative_unsigned ? "must be from " + range + ", got " + value
                                   : "not an integer: '" + value + "'";
        }
        if (v < min || v > max) return "must be from " + range + ", got " + value;
        value = std::to_string(v);  // canonical text, so CLI11's conversion reads exactly this number
        return "";
      },
      max == std::numeric_limits<T>::max() ? ">=" + std::to_string(min) : range);
}

}  // namespace dpv::cli
