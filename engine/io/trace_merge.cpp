#include "engine/io/trace_merge.h"

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/checked_json.h"
#include "engine/io/input_file.h"

namespace dpv {
namespace {

using Json = nlohmann::ordered_json;

Json parse_trace(const std::string& text, const std::string& name) {
  Json j = parse_json<Json>(text, name + " is not a Chrome trace", kTraceInput.max_bytes);
  if (j.is_array()) j = Json{{"traceEvents", j}};  // the format's bare-array form
  if (!j.is_object() || !j.contains("traceEvents") || !j["traceEvents"].is_array())
    throw Error(name + " is not a Chrome trace: no \"traceEvents\" array", ErrorClass::ValueError);
  return j;
}

// An event's text field, "" when it is missing or not text: a trace from another tool may put a
// number there, which Json::value() would throw for as a type error (not a dpv::Error).
std::string text_field(const Json& event, const char* key) {
  const auto it = event.find(key);
  return it != event.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The rank a trace names in "otherData": {"rank": r}; its position in the list when it names none.
int trace_rank(const Json& j, size_t position, const std::string& name) {
  if (!j.contains("otherData") || !j["otherData"].is_object() || !j["otherData"].contains("rank"))
    return static_cast<int>(position);
  const Json& rank = j["otherData"]["rank"];
  if (!rank.is_number_integer()) return static_cast<int>(position);
  // Past int, get<int>() would wrap 99999999999 into some other rank.
  const bool in_range = rank.is_number_unsigned() ? rank.get<uint64_t>() <= INT32_MAX
                                                  : rank.get<int64_t>() >= 0 && rank.get<int64_t>() <= INT32_MAX;
  if (!in_range)
    throw Error(name + ": \"otherData\" gives rank " + rank.dump() + ", not a rank (0 to " + std::to_string(INT32_MAX) + ")",
                ErrorClass::ValueError);
  return rank.get<int>();
}

}  // namespace

std::string merge_chrome_traces(const std::vector<std::string>& traces, const std::vector<std::string>& names) {
  check(!traces.empty(), "trace merge: no input traces", ErrorClass::ValueError);
  Json events = Json::array();
  std::map<int, std::string> seen;  // rank -> input name
  for (size_t i = 0; i < traces.size(); ++i) {
    const std::string name = i < names.size() ? names[i] : "trace " + std::to_string(i);
    Json j = parse_trace(traces[i], name);
    const int rank = trace_rank(j, i, name);
    if (seen.count(rank)) {
      throw Error("trace merge: " + name + " and " + seen[rank] + " are both rank " + std::to_string(rank) +
                      " (give each rank's trace once)",
                  ErrorClass::ValueError);
    }
    seen[rank] = name;

    std::string process_label;
    for (Json& e : j["traceEvents"]) {
      if (!e.is_object()) continue;
      if (text_field(e, "ph") == "M" && text_field(e, "name") == "process_name" && e.contains("args") &&
          e["args"].is_object() && e["args"].contains("name") && e["args"]["name"].is_string())
        process_label = e["args"]["name"].get<std::string>();
    }
    const std::string label = "rank " + std::to_string(rank) + (process_label.empty() ? "" : ": " + process_label);
    events.push_back(Json{{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 0}, {"args", {{"name", label}}}});
    events.push_back(
        Json{{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank}, {"tid", 0}, {"args", {{"sort_index", rank}}}});
    for (Json& e : j["traceEvents"]) {
      if (!e.is_object()) continue;
      const std::string ph = text_field(e, "ph");
      const std::string ev_name = text_field(e, "name");
      if (ph == "M" && (ev_name == "process_name" || ev_name == "process_sort_index")) continue;  // replaced above
      e["pid"] = rank;
      if (e.contains("args") && e["args"].is_object() && ph != "M") e["args"]["rank"] = rank;
      events.push_back(std::move(e));
    }
  }
  Json root{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"},
            {"otherData", {{"merged_ranks", static_cast<int>(seen.size())}}}};
  return root.dump(1, ' ', false, Json::error_handler_t::replace);
}

void merge_trace_files(const std::string& out, const std::vector<std::string>& inputs) {
  std::vector<std::string> texts;
  for (const std::string& in : inputs) texts.push_back(read_file(in, kTraceInput));
  write_file_atomic(out, merge_chrome_traces(texts, inputs));
}

}  // namespace dpv
