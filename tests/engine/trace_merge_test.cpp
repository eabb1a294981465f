// Merging per-rank Chrome traces: a process per rank, named and sorted by rank, events moved to
// their rank's process, and clear errors for inputs that are not traces or repeat a rank.
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "engine/error.h"
#include "engine/io/trace_merge.h"

namespace dpv {
namespace {

using Json = nlohmann::json;

std::string rank_trace(const std::string& stage, double ts, int extra_rank = -1) {
  Json t{{"traceEvents",
          {{{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 0}, {"args", {{"name", "dpviz DDP"}}}},
           {{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "cpu:0"}}}},
           {{"name", stage}, {"ph", "X"}, {"pid", 1}, {"tid", 1}, {"ts", ts}, {"dur", 5.0}, {"args", {{"stage", 0}}}}}}};
  if (extra_rank >= 0) t["otherData"] = {{"rank", extra_rank}};
  return t.dump();
}

TEST(TraceMerge, OneProcessPerRank) {
  Json merged = Json::parse(merge_chrome_traces({rank_trace("forward", 1), rank_trace("backward", 2)}, {"a", "b"}));
  std::map<int, std::string> names;
  std::map<int, std::vector<std::string>> stages;
  for (const Json& e : merged["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") names[e["pid"].get<int>()] = e["args"]["name"];
    if (e["ph"] == "X") {
      stages[e["pid"].get<int>()].push_back(e["name"]);
      EXPECT_EQ(e["args"]["rank"], e["pid"]);
    }
  }
  EXPECT_EQ(names[0], "rank 0: dpviz DDP");
  EXPECT_EQ(names[1], "rank 1: dpviz DDP");
  EXPECT_EQ(stages[0], std::vector<std::string>{"forward"});
  EXPECT_EQ(stages[1], std::vector<std::string>{"backward"});
  int process_names = 0;
  for (const Json& e : merged["traceEvents"]) process_names += e["name"] == "process_name";
  EXPECT_EQ(process_names, 2) << "each rank's own process_name is replaced, not repeated";
  EXPECT_EQ(merged["otherData"]["merged_ranks"], 2);
}

TEST(TraceMerge, RankFromTheTraceItselfWins) {
  Json merged = Json::parse(merge_chrome_traces({rank_trace("x", 0, 3), rank_trace("y", 0, 1)}, {"a", "b"}));
  std::set<int> pids;
  for (const Json& e : merged["traceEvents"]) pids.insert(e["pid"].get<int>());
  EXPECT_EQ(pids, (std::set<int>{1, 3}));
}

TEST(TraceMerge, ErrorsNameTheInput) {
  try {
    merge_chrome_traces({rank_trace("x", 0), "{not json"}, {"r0.json", "r1.json"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("r1.json is not a Chrome trace: not valid JSON"), std::string::npos) << e.what();
  }
  try {
    merge_chrome_traces({"{\"events\": []}"}, {"r0.json"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no \"traceEvents\" array"), std::string::npos) << e.what();
  }
  try {
    merge_chrome_traces({rank_trace("x", 0, 0), rank_trace("y", 0, 0)}, {"a.json", "b.json"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("b.json and a.json are both rank 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dpv
