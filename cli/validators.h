#pragma once
// Option checks with short messages ("--steps: must be at least 1, got 0"); CLI11's own range
// validators print the whole double range.
#include <string>

#include <CLI/CLI.hpp>

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

}  // namespace dpv::cli
