#include "course/launch_events.h"

#include <csignal>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/io/checked_json.h"
#include "engine/io/input_file.h"

namespace dpv::course {

namespace {

using Json = nlohmann::json;

// `where`: "launch event \"exited\"", or the error file's path.
[[noreturn]] void bad_field(const std::string& where, const char* key, const char* wanted) {
  throw Error(where + ": \"" + key + "\" is missing or not " + wanted + " (is it written by dpv launch?)", ErrorClass::ValueError);
}

int int_of(const Json& e, const std::string& event, const char* key) {
  const auto it = e.find(key);
  if (it == e.end() || !it->is_number_integer()) bad_field(event, key, "an integer");
  const int64_t v = it->get<int64_t>();
  if (v < INT32_MIN || v > INT32_MAX) bad_field(event, key, "an integer in range");
  return static_cast<int>(v);
}

int64_t int64_of(const Json& e, const std::string& event, const char* key) {
  const auto it = e.find(key);
  if (it == e.end() || !it->is_number_integer()) bad_field(event, key, "an integer");
  return it->get<int64_t>();
}

std::optional<int> int_or_null(const Json& e, const std::string& event, const char* key) {
  const auto it = e.find(key);
  if (it != e.end() && it->is_null()) return std::nullopt;
  return int_of(e, event, key);
}

bool bool_of(const Json& e, const std::string& event, const char* key) {
  const auto it = e.find(key);
  if (it == e.end() || !it->is_boolean()) bad_field(event, key, "true or false");
  return it->get<bool>();
}

std::string text_of(const Json& e, const std::string& event, const char* key) {
  const auto it = e.find(key);
  if (it == e.end() || !it->is_string()) bad_field(event, key, "a string");
  return it->get<std::string>();
}

// "<prefix><digits>": the number after `prefix` at the start of `text`, or none.
std::optional<int> number_after(std::string_view text, std::string_view prefix) {
  if (text.substr(0, prefix.size()) != prefix) return std::nullopt;
  int64_t value = 0;
  size_t i = prefix.size(), digits = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9' && digits < 9; ++i, ++digits) value = value * 10 + (text[i] - '0');
  if (digits == 0) return std::nullopt;
  return static_cast<int>(value);
}

}  // namespace

LaunchEvent parse_launch_event(std::string_view line) {
  const Json e = parse_json<Json>(line, "launch event", kMaxLaunchEventLine);
  if (!e.is_object()) throw Error("launch event: a line is not a JSON object: " + json_excerpt(e), ErrorClass::ValueError);
  const std::string kind = text_of(e, "launch event", "event");
  const std::string k = "launch event \"" + kind + "\"";
  LaunchEvent out;
  if (kind == "started") {
    out.kind = LaunchEventKind::Started;
    out.attempt = int_of(e, k, "attempt");
    out.rank = int_of(e, k, "rank");
    out.local_rank = int_of(e, k, "local_rank");
    out.pid = int64_of(e, k, "pid");
  } else if (kind == "exited") {
    out.kind = LaunchEventKind::Exited;
    out.attempt = int_of(e, k, "attempt");
    out.rank = int_of(e, k, "rank");
    out.pid = int64_of(e, k, "pid");
    out.exit_code = int_or_null(e, k, "exit_code");
    out.signal = int_or_null(e, k, "signal");
    out.stopped_by_launcher = bool_of(e, k, "stopped_by_launcher");
  } else if (kind == "restarting") {
    out.kind = LaunchEventKind::Restarting;
    out.attempt = int_of(e, k, "attempt");
    out.failed_rank = int_of(e, k, "failed_rank");
    out.max_restarts = int_of(e, k, "max_restarts");
  } else if (kind == "finished") {
    out.kind = LaunchEventKind::Finished;
    out.ok = bool_of(e, k, "ok");
    out.attempts = int_of(e, k, "attempts");
    out.failed_rank = int_of(e, k, "failed_rank");
    out.message = text_of(e, k, "message");
  } else {
    throw Error("launch event: unknown \"event\": " + json_excerpt(e["event"]) +
                    " (expected started, exited, restarting or finished)",
                ErrorClass::ValueError);
  }
  if (out.rank < -1 || out.attempt < 0 || out.failed_rank < -1)
    throw Error("launch event \"" + kind + "\": a negative rank or attempt", ErrorClass::ValueError);
  return out;
}

std::vector<LaunchEvent> LaunchEventsReader::feed(std::string_view bytes) {
  std::vector<LaunchEvent> out;
  consumed_ += bytes.size();
  while (!bytes.empty()) {
    const size_t nl = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, nl);
    if (!skipping_long_line_) {
      if (partial_.size() + piece.size() > kMaxLaunchEventLine) {
        skipping_long_line_ = true;  // drop it as it comes, never holding more than the limit
        partial_.clear();
      } else {
        partial_.append(piece);
      }
    }
    if (nl == std::string_view::npos) break;  // the rest of this line comes later
    ++line_no_;
    if (skipping_long_line_) {
      problems_.push_back("line " + std::to_string(line_no_) + ": longer than " + std::to_string(kMaxLaunchEventLine) +
                          " bytes, skipped");
    } else {
      take_line(partial_, out);
    }
    partial_.clear();
    skipping_long_line_ = false;
    bytes.remove_prefix(nl + 1);
  }
  return out;
}

void LaunchEventsReader::take_line(std::string_view line, std::vector<LaunchEvent>& out) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
  try {
    out.push_back(parse_launch_event(line));
  } catch (const Error& e) {
    problems_.push_back("line " + std::to_string(line_no_) + ": " + e.what());
  }
}

void LaunchJob::apply(const LaunchEvent& e) {
  // The first rank the launcher blames replaces the guess from the exits; a later one does not.
  auto name_failed_rank = [this](int rank) {
    if (rank < 0 || failed_rank_named) return;
    first_failed_rank = rank;
    failed_rank_named = true;
  };
  auto status_of = [this](int rank) -> RankStatus& {
    if (rank >= static_cast<int>(ranks.size())) ranks.resize(static_cast<size_t>(rank) + 1);
    ranks[static_cast<size_t>(rank)].rank = rank;
    return ranks[static_cast<size_t>(rank)];
  };
  switch (e.kind) {
    case LaunchEventKind::Started: {
      if (e.rank < 0) return;
      RankStatus& s = status_of(e.rank);
      s = RankStatus{e.rank, e.attempt, e.pid, RankState::Running, std::nullopt, std::nullopt, false, restarts};
      attempt = std::max(attempt, e.attempt);
      return;
    }
    case LaunchEventKind::Exited: {
      if (e.rank < 0) return;
      RankStatus& s = status_of(e.rank);
      if (e.attempt < s.attempt) return;  // an older attempt's news
      s.attempt = e.attempt;
      s.pid = e.pid;
      s.exit_code = e.exit_code;
      s.signal = e.signal;
      s.stopped_by_launcher = e.stopped_by_launcher;
      stopped_by_launcher += e.stopped_by_launcher ? 1 : 0;
      s.state = e.signal ? RankState::Signalled : RankState::Exited;
      const bool failed = e.signal.has_value() || e.exit_code.value_or(0) != 0;
      if (failed && !e.stopped_by_launcher && first_failed_rank < 0) first_failed_rank = e.rank;
      return;
    }
    case LaunchEventKind::Restarting:
      ++restarts;
      max_restarts = e.max_restarts;
      name_failed_rank(e.failed_rank);
      return;
    case LaunchEventKind::Finished:
      finished = e;
      name_failed_rank(e.failed_rank);
      return;
  }
}

std::optional<int64_t> LaunchJob::running_pid(int rank) const {
  if (rank < 0 || rank >= static_cast<int>(ranks.size())) return std::nullopt;
  const RankStatus& s = ranks[static_cast<size_t>(rank)];
  if (s.rank != rank || s.attempt != attempt || s.state != RankState::Running || s.pid <= 0) return std::nullopt;
  return s.pid;
}

std::string signal_name(int signal) {
  switch (signal) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGSTOP: return "SIGSTOP";
    case SIGINT: return "SIGINT";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGCONT: return "SIGCONT";
    default: return "signal " + std::to_string(signal);
  }
}

std::string rank_status_text(const RankStatus& s) {
  std::string text;
  switch (s.state) {
    case RankState::Running: text = "running"; break;
    case RankState::Stopped: text = "stopped (" + signal_name(s.signal.value_or(SIGSTOP)) + ")"; break;
    case RankState::Exited: text = "exited " + std::to_string(s.exit_code.value_or(0)); break;
    case RankState::Signalled: text = "killed by " + signal_name(s.signal.value_or(0)); break;
  }
  if (s.stopped_by_launcher) text += ", stopped by the launcher";
  if (s.restarts > 0) text += " (restarted at attempt " + std::to_string(s.attempt) + ")";
  return text;
}

std::optional<int> progress_step(std::string_view line) {
  const size_t first = line.find_first_not_of(' ');
  if (first == std::string_view::npos) return std::nullopt;
  line.remove_prefix(first);
  if (line.substr(0, 5) != "step ") return std::nullopt;
  line.remove_prefix(5);
  line.remove_prefix(std::min(line.size(), line.find_first_not_of(' ')));  // "step  2/10": the step is right-aligned
  const std::optional<int> step = number_after(line, "");
  if (!step) return std::nullopt;
  const size_t slash = line.find('/');
  return slash != std::string_view::npos && slash == std::to_string(*step).size() ? step : std::nullopt;
}

std::optional<int> resumed_step(std::string_view line) {
  if (line.substr(0, 13) != "resumed from ") return std::nullopt;
  const size_t at = line.rfind("(step ");
  if (at == std::string_view::npos) return std::nullopt;
  return number_after(line.substr(at), "(step ");
}

std::optional<LauncherError> read_launcher_error_file(const std::string& path) {
  const InputKind kind{"launcher error file", kMaxLauncherErrorFileBytes};
  std::string bytes;
  try {
    bytes = read_file(path, kind);
  } catch (const Error& e) {
    if (e.error_class() == ErrorClass::FileNotFoundError) return std::nullopt;  // the launcher wrote none
    throw;
  }
  const Json doc = parse_json<Json>(bytes, path, kMaxLauncherErrorFileBytes);
  if (!doc.is_object()) throw Error(path + ": not a JSON object (is it dpv launch's --error-file?)", ErrorClass::ValueError);
  LauncherError out;
  out.error_class = text_of(doc, path, "error_class");
  out.message = text_of(doc, path, "message");
  out.rank = int_of(doc, path, "rank");
  return out;
}

}  // namespace dpv::course
