#include "engine/process_groups/seconds.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "engine/error.h"

namespace dpv {
namespace {

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

std::string seconds_problem(const std::string& text, SecondsRange range) {
  const std::string expected =
      "must be a finite number of seconds from " + number_text(range.min) + " to " + number_text(range.max);
  char* end = nullptr;
  errno = 0;
  const double v = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  const bool whole_text = end && end != text.c_str() && *end == '\0';
  // strtod takes "inf", "nan" and reports 1e400 as HUGE_VAL with ERANGE: none is a duration.
  if (!whole_text || !std::isfinite(v) || errno == ERANGE) return expected + ", got '" + text + "'";
  if (v < range.min || v > range.max) return expected + ", got " + text;
  return "";
}

double parse_seconds(const std::string& text, const std::string& what, SecondsRange range) {
  const std::string problem = seconds_problem(text, range);
  check(problem.empty(), what + "='" + text + "': " + problem, ErrorClass::ValueError);
  return std::strtod(text.c_str(), nullptr);
}

}  // namespace dpv
