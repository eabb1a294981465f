#pragma once
// Option checks with short messages ("--steps: must be at least 1, got 0"); CLI11's own range
// validators print the whole double range.
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/process_groups/seconds.h"

namespace dpv::cli {

inline CLI::Validator at_least(double min) {
  std::string min_text = std::to_string(min);
  min_text.erase(min_text.find_last_not_of('0') + 1);
  if (!min_text.empty() && min_text.back() == '.') min_text.pop_back();
  return CLI::Validator(
      [min, min_text](std::string& value) -> std::string {
        double v = 0;
        try {
          size_t used = 0;
          v = std::stod(value, &used);
          if (used != value.size()) return "not a number: '" + value + "'";
        } catch (const std::exception&) {
          return "not a number: '" + value + "'";
        }
        if (!(v >= min)) return "must be at least " + min_text + ", got " + value;
        return "";
      },
      ">=" + min_text);
}

// A duration flag: every one goes through the engine's one checked conversion (seconds.h), so
// "inf" or "1e300" is refused here with the range instead of overflowing into a zero timeout.
inline CLI::Validator seconds_in(SecondsRange range) {
  return CLI::Validator([range](std::string& value) { return seconds_problem(value, range); }, "SECONDS");
}

// A benchmark's message size: a finite byte count up to 1 TiB (the memory check comes after).
inline constexpr double kMaxBenchBytes = 1024.0 * 1024 * 1024 * 1024;

// A finite number from min to max ("1e30" bytes is refused before anything is allocated).
inline CLI::Validator number_in(double min, double max) {
  auto text = [](double v) {
    std::ostringstream s;
    s << std::setprecision(15) << v;  // 1099511627776, not 1.09951e+12
    return s.str();
  };
  const std::string range = text(min) + " to " + text(max);
  return CLI::Validator(
      [min, max, range](std::string& value) -> std::string {
        char* end = nullptr;
        const double v = value.empty() ? NAN : std::strtod(value.c_str(), &end);
        if (!end || end == value.c_str() || *end != '\0' || !std::isfinite(v)) return "not a number: '" + value + "'";
        if (v < min || v > max) return "must be from " + range + ", got " + value;
        return "";
      },
      range);
}

}  // namespace dpv::cli
