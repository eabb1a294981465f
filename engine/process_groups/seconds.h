#pragma once
// The one checked conversion of a duration given as text (a flag, an environment variable) into
// seconds. "inf", "nan", "1e300" and friends must fail here with a message, never overflow into a
// zero or negative millisecond count further down (an instant "timed out after 0 s").
#include <string>

namespace dpv {

// The accepted seconds, both ends included.
struct SecondsRange {
  double min;
  double max;
};

// A store or collective timeout: a millisecond at least (the resolution of the deadlines), a week
// at most (torch.distributed's default is 30 minutes; a week covers any real wait).
inline constexpr SecondsRange kTimeoutSeconds{0.001, 7 * 24 * 3600.0};
// A benchmark's time budget per message size: 0 (one timed call) to an hour.
inline constexpr SecondsRange kBenchSecondsPerSize{0, 3600};

// What is wrong with `text` as a number of seconds in `range` ("must be a finite number of
// seconds from 0.001 to 604800, got 'inf'"), or "" when it is fine. Decimal and exponent forms
// ("30", "0.5", "1e3") are accepted; trailing text is not.
std::string seconds_problem(const std::string& text, SecondsRange range);

// The seconds in `text`; throws dpv::Error (ValueError) "<what>='<text>': <problem>" otherwise,
// where `what` names the source (an environment variable, say).
double parse_seconds(const std::string& text, const std::string& what, SecondsRange range);

}  // namespace dpv
