#include "engine/netmodel/link_model.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <utility>
#include <vector>

#include "engine/error.h"

namespace dpv::netmodel {

const char* collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllReduce: return "all-reduce";
    case CollectiveKind::ReduceScatter: return "reduce-scatter";
    case CollectiveKind::AllGather: return "all-gather";
    case CollectiveKind::Broadcast: return "broadcast";
  }
  return "all-reduce";
}

int collective_messages(CollectiveKind kind, int world) {
  check(world >= 1, "a collective needs at least one rank, got world size " + std::to_string(world),
        ErrorClass::ValueError);
  switch (kind) {
    case CollectiveKind::AllReduce: return 2 * (world - 1);
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather: return world - 1;
    case CollectiveKind::Broadcast: {
      int rounds = 0;  // ceil(log2 world): the binomial tree doubles the ranks that hold the data
      while ((1 << rounds) < world) ++rounds;
      return rounds;
    }
  }
  return 0;
}

double collective_seconds(CollectiveKind kind, int world, size_t bytes, const Link& link) {
  check(link.bandwidth_bytes_per_s > 0 && std::isfinite(link.bandwidth_bytes_per_s),
        "the link's bandwidth must be a positive number of bytes per second", ErrorClass::ValueError);
  check(link.latency_s >= 0 && std::isfinite(link.latency_s), "the link's latency must be 0 seconds or more",
        ErrorClass::ValueError);
  const int messages = collective_messages(kind, world);
  if (messages == 0 || bytes == 0) return 0;
  const double n = static_cast<double>(bytes);
  // A ring step moves one of W chunks; a broadcast round moves the whole message.
  const double per_message = kind == CollectiveKind::Broadcast ? n : n / world;
  return messages * (link.latency_s + per_message / link.bandwidth_bytes_per_s);
}

namespace {

// "10.5mbit" -> (10.5, "mbit"); false when no number leads.
bool split_number(const std::string& text, double& number, std::string& unit) {
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.')) return false;
  char* end = nullptr;
  number = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(number)) return false;
  unit = std::string(end);
  return true;
}

}  // namespace

double parse_rate_bits_per_s(const std::string& text, const std::string& what) {
  // tc's units: bit, kbit, mbit, gbit (bits per second) and bps, kbps, mbps, gbps (bytes per second).
  static const std::vector<std::pair<std::string, double>> units = {
      {"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"bps", 8}, {"kbps", 8e3}, {"mbps", 8e6}, {"gbps", 8e9}};
  const std::string forms = "a rate as tc writes it, e.g. 10mbit, 1gbit, 500kbit or 2mbps (bytes/s)";
  double number = 0;
  std::string unit;
  check(split_number(text, number, unit), what + " '" + text + "' is not " + forms, ErrorClass::ValueError);
  for (const auto& [name, scale] : units) {
    if (unit != name) continue;
    const double bits = number * scale;
    check(bits >= 8e3 && bits <= 400e9,
          what + " '" + text + "' is out of range: give 8kbit to 400gbit (tbf cannot shape slower or faster)",
          ErrorClass::ValueError);
    return bits;
  }
  throw Error(what + " '" + text + "' has no known unit: give " + forms, ErrorClass::ValueError);
}

double parse_delay_s(const std::string& text, const std::string& what) {
  static const std::vector<std::pair<std::string, double>> units = {{"us", 1e-6}, {"ms", 1e-3}, {"s", 1}};
  double number = 0;
  std::string unit;
  const std::string forms = "a delay as netem writes it, e.g. 0, 500us, 10ms or 1s";
  check(split_number(text, number, unit) && number >= 0, what + " '" + text + "' is not " + forms,
        ErrorClass::ValueError);
  if (unit.empty() && number == 0) return 0;
  for (const auto& [name, scale] : units) {
    if (unit != name) continue;
    const double seconds = number * scale;
    check(seconds <= 10, what + " '" + text + "' is over 10 s: give a delay from 0 to 10s", ErrorClass::ValueError);
    return seconds;
  }
  throw Error(what + " '" + text + "' has no known unit: give " + forms, ErrorClass::ValueError);
}

std::string rate_text(double bits_per_s) {
  const char* unit = "bit";
  double v = bits_per_s;
  if (bits_per_s >= 1e9) {
    unit = "gbit", v = bits_per_s / 1e9;
  } else if (bits_per_s >= 1e6) {
    unit = "mbit", v = bits_per_s / 1e6;
  } else if (bits_per_s >= 1e3) {
    unit = "kbit", v = bits_per_s / 1e3;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g%s", v, unit);
  return buf;
}

std::string delay_text(double seconds) {
  char buf[64];
  if (seconds > 0 && seconds < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.6gus", seconds * 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.6gms", seconds * 1e3);
  }
  return buf;
}

}  // namespace dpv::netmodel
