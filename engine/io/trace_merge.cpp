#include "engine/io/trace_merge.h"

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

}  // namespace

std::string merge_chrome_traces(const std::vector<std::string>& traces, const std::vector<std::string>& names) {
  check(!traces.empty(), "trace merge: no input traces", ErrorClass::ValueError);
  Json events = Json::array();
  std::map<int, std::string> seen;  // rank -> input name
  for (size_t i = 0; i < traces.size(); ++i) {
    const std::string name = i < names.size() ? names[i] : "trace " + std::to_string(i);
    Json j = parse_trace(traces[i], name);
    int rank = static_cast<int>(i);
    if (j.contains("otherData") && j["otherData"].is_object() && j["otherData"].contains("rank") &&
        j["otherData"]["rank"].is_number_integer())
      rank = j["otherData"]["rank"].get<int>();
    if (seen.count(rank)) {
      throw Error("trace merge: " + name + " and " + seen[rank] + " are both rank " + std::to_string(rank) +
                      " (give each rank's trace once)",
                  ErrorClass::ValueError);
    }
    seen[rank] = name;

    std::string process_label;
    for (Json& e : j["traceEvents"]) {
      if (!e.is_object()) continue;
      if (e.value("ph", "") == "M" && e.value("name", "") == "process_name" && e.contains("args") &&
          e["args"].is_object() && e["args"].contains("name") && e["args"]["name"].is_string())
        process_label = e["args"]["name"].get<std::string>();
    }
    const std::string label = "rank " + std::to_string(rank) + (process_label.empty() ? "" : ": " + process_label);
    events.push_back(Json{{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 0}, {"args", {{"name", label}}}});
    events.push_back(
        Json{{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank}, {"tid", 0}, {"args", {{"sort_index", rank}}}});
    for (Json& e : j["traceEvents"]) {
      if (!e.is_object()) continue;
      const std::string ph = e.value("ph", "");
      const std::string ev_name = e.value("name", "");
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
