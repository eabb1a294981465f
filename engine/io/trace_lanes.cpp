#include "engine/io/trace_lanes.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "engine/error.h"
#include "engine/io/checked_json.h"
#include "engine/io/input_file.h"

namespace dpv {
namespace {

using Json = nlohmann::json;

int int_field(const Json& e, const char* key) {
  if (!e.contains(key)) return 0;
  const Json& v = e[key];
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_number()) {  // a float outside int's range would be undefined behaviour to convert
    const double d = v.get<double>();
    return d >= -2147483648.0 && d <= 2147483647.0 ? static_cast<int>(d) : 0;
  }
  return 0;
}

// A string field, or "" when absent or not a string (json's value() throws on a wrong type).
std::string text_field(const Json& e, const char* key) {
  const auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}

double number_field(const Json& e, const char* key) {
  return e.contains(key) && e[key].is_number() ? e[key].get<double>() : 0.0;
}

// nlohmann's DOM builder (what Json::parse uses) with a question before every object: `tick` throws
// to stop the parse. nlohmann's parse callback would do the same, but it is a hundred times slower
// on a large document (minutes instead of seconds for a 43 MB trace).
class CancellableDomParser : public nlohmann::detail::json_sax_dom_parser<Json> {
 public:
  CancellableDomParser(Json& root, const std::function<void()>& tick) : json_sax_dom_parser(root, true), tick_(tick) {}
  bool start_object(std::size_t size) {
    tick_();
    return json_sax_dom_parser::start_object(size);
  }

 private:
  const std::function<void()>& tick_;
};

}  // namespace

std::string lane_thread_label(const std::string& process, const std::string& thread) {
  auto trimmed = [](std::string text) {
    const size_t first = text.find_first_not_of(' ');
    if (first == std::string::npos) return std::string();
    return text.substr(first, text.find_last_not_of(' ') - first + 1);
  };
  if (process.empty() || thread.rfind(process + " ", 0) != 0) return thread;
  std::string rest = trimmed(thread.substr(process.size() + 1));
  const size_t close = rest.find(')');
  if (!rest.empty() && rest[0] == '(' && close != std::string::npos && close > 0)
    rest = rest.substr(1, close - 1) + rest.substr(close + 1);
  rest = trimmed(rest);
  return rest.empty() ? thread : rest;
}

TraceLanes read_trace_lanes(const std::string& json_text, const std::string& source, const TraceReadCancelled& cancelled) {
  // Asked once per kCancelCheckEvery objects or events: often enough to stop within milliseconds,
  // rarely enough to cost nothing next to the parse.
  constexpr size_t kCancelCheckEvery = 4096;
  size_t ticks = 0;
  const std::function<void()> check_cancelled = [&] {
    if (cancelled && ++ticks % kCancelCheckEvery == 0 && cancelled())
      throw Error("reading " + source + " was cancelled", ErrorClass::ValueError);
  };
  Json root;
  if (!cancelled) {
    root = parse_json<Json>(json_text, source + " is not a Chrome trace", kTraceInput.max_bytes);
  } else {
    // parse_json's checks, then nlohmann's own DOM builder, asked between objects.
    check_json_limits(json_text, source + " is not a Chrome trace", kTraceInput.max_bytes);
    try {
      CancellableDomParser builder(root, check_cancelled);
      Json::sax_parse(json_text, &builder);
    } catch (const nlohmann::json::exception& error) {
      throw json_parse_error(error, source + " is not a Chrome trace");
    }
  }

  const Json* events = nullptr;
  if (root.is_array()) events = &root;
  else if (root.is_object() && root.contains("traceEvents") && root["traceEvents"].is_array()) events = &root["traceEvents"];
  if (!events) throw Error(source + " is not a Chrome trace: no \"traceEvents\" array", ErrorClass::ValueError);

  std::map<int, std::string> process_names;
  std::map<int, int> process_order;
  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<std::pair<int, int>, int> thread_order;
  for (const Json& e : *events) {
    check_cancelled();
    if (!e.is_object() || text_field(e, "ph") != "M" || !e.contains("args") || !e["args"].is_object()) continue;
    const std::string name = text_field(e, "name");
    const int pid = int_field(e, "pid"), tid = int_field(e, "tid");
    const Json& args = e["args"];
    if (name == "process_name" && args.contains("name") && args["name"].is_string()) process_names[pid] = args["name"];
    if (name == "thread_name" && args.contains("name") && args["name"].is_string()) thread_names[{pid, tid}] = args["name"];
    if (name == "process_sort_index") process_order[pid] = int_field(args, "sort_index");
    if (name == "thread_sort_index") thread_order[{pid, tid}] = int_field(args, "sort_index");
  }

  TraceLanes out;
  std::map<std::pair<int, int>, int> lane_of;
  std::vector<std::pair<std::pair<int, int>, TraceSpan>> raw;
  for (const Json& e : *events) {
    check_cancelled();
    if (!e.is_object() || text_field(e, "ph") != "X") continue;
    const std::pair<int, int> key{int_field(e, "pid"), int_field(e, "tid")};
    lane_of.emplace(key, 0);
    TraceSpan s;
    s.name = text_field(e, "name");
    s.category = e.contains("cat") && e["cat"].is_string() ? e["cat"].get<std::string>() : "";
    s.start_us = number_field(e, "ts");
    s.duration_us = std::max(0.0, number_field(e, "dur"));
    if (e.contains("args")) s.args = e["args"].dump(-1, ' ', false, Json::error_handler_t::replace);
    raw.emplace_back(key, std::move(s));
  }
  std::vector<std::pair<int, int>> keys;
  for (const auto& [key, lane] : lane_of) keys.push_back(key);
  auto order = [&](const std::pair<int, int>& k) {
    const auto p = process_order.find(k.first);
    const auto t = thread_order.find(k);
    return std::make_tuple(p == process_order.end() ? k.first : p->second, k.first,
                           t == thread_order.end() ? k.second : t->second, k.second);
  };
  std::sort(keys.begin(), keys.end(), [&](const auto& a, const auto& b) { return order(a) < order(b); });
  std::map<int, bool> seen_process;
  for (const auto& key : keys) {
    lane_of[key] = static_cast<int>(out.lanes.size());
    TraceLane lane;
    lane.pid = key.first;
    lane.tid = key.second;
    const auto p = process_names.find(key.first);
    lane.process = p == process_names.end() ? "process " + std::to_string(key.first) : p->second;
    const auto t = thread_names.find(key);
    lane.thread = t == thread_names.end() ? "thread " + std::to_string(key.second) : t->second;
    lane.process_label = lane.process.substr(0, lane.process.find(':'));  // "rank 1: dpviz DDP" -> "rank 1"
    lane.thread_label = lane_thread_label(lane.process_label, lane.thread);
    out.lanes.push_back(std::move(lane));
    seen_process[key.first] = true;
  }
  out.processes = static_cast<int>(seen_process.size());
  for (auto& [key, span] : raw) {
    span.lane = lane_of[key];
    out.end_us = std::max(out.end_us, span.start_us + span.duration_us);
    out.spans.push_back(std::move(span));
  }
  return out;
}

}  // namespace dpv
