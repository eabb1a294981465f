// Reading a (merged) Chrome trace back as lanes: one per (process, thread), ordered by the sort
// indices, named by the metadata events; spans from complete events only.
#include <gtest/gtest.h>

#include "engine/error.h"
#include "engine/io/trace_lanes.h"
#include "engine/io/trace_merge.h"

namespace dpv {
namespace {

const char* kRankTrace = R"({"traceEvents":[
  {"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"dpviz DDP"}},
  {"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"host"}},
  {"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"cpu:0"}},
  {"name":"Forward 0","cat":"forward","ph":"X","pid":1,"tid":1,"ts":10,"dur":5,"args":{"stage":0}},
  {"name":"Backward 0","cat":"backward","ph":"X","pid":1,"tid":0,"ts":20,"dur":7},
  {"name":"counter","ph":"C","pid":1,"tid":0,"ts":1}]})";

TEST(TraceLanes, MergedTraceHasALaneGroupPerRank) {
  const std::string merged = merge_chrome_traces({kRankTrace, kRankTrace, kRankTrace}, {"a", "b", "c"});
  TraceLanes t = read_trace_lanes(merged, "merged");
  EXPECT_EQ(t.processes, 3);
  ASSERT_EQ(t.lanes.size(), 6u);
  EXPECT_EQ(t.lanes[0].process, "rank 0: dpviz DDP");
  EXPECT_EQ(t.lanes[0].process_label, "rank 0");
  EXPECT_EQ(t.lanes[1].thread_label, "cpu:0");
  EXPECT_EQ(t.lanes[0].thread, "host");
  EXPECT_EQ(t.lanes[1].thread, "cpu:0");
  EXPECT_EQ(t.lanes[5].process, "rank 2: dpviz DDP");
  ASSERT_EQ(t.spans.size(), 6u);
  EXPECT_DOUBLE_EQ(t.end_us, 27);
  for (const TraceSpan& s : t.spans) {
    const TraceLane& lane = t.lanes[static_cast<size_t>(s.lane)];
    EXPECT_EQ(s.name == "Forward 0", lane.thread == "cpu:0") << s.name << " on " << lane.thread;
    if (s.name == "Forward 0") {
      EXPECT_EQ(s.category, "forward");
      EXPECT_NE(s.args.find("\"rank\":" + std::to_string(lane.pid)), std::string::npos) << s.args;
    }
  }
}

TEST(TraceLanes, UnnamedLanesAndBadInput) {
  TraceLanes t = read_trace_lanes(R"([{"name":"x","ph":"X","pid":7,"tid":3,"ts":0,"dur":1}])", "bare");
  ASSERT_EQ(t.lanes.size(), 1u);
  EXPECT_EQ(t.lanes[0].process, "process 7");
  EXPECT_EQ(t.lanes[0].thread, "thread 3");
  EXPECT_THROW(read_trace_lanes("{", "broken.json"), Error);
  EXPECT_THROW(read_trace_lanes("{\"x\":1}", "other.json"), Error);
}

TEST(TraceLanes, FieldsOfTheWrongTypeAreSkippedNotThrownAsJsonErrors) {
  // Found by tests/fuzz/trace_lanes_fuzz: "ph" as an object made json's value() throw type_error.
  TraceLanes lanes;
  ASSERT_NO_THROW(lanes = read_trace_lanes(
                      R"({"traceEvents": [{"name": 5, "ph": {"bytes": 128}}, {"name": "f", "ph": "X", "pid": 1e300,
                          "tid": 2, "ts": 1, "dur": 2}]})",
                      "odd.json"));
  ASSERT_EQ(lanes.spans.size(), 1u);
  EXPECT_EQ(lanes.spans[0].name, "f");
}

}  // namespace
}  // namespace dpv

TEST(TraceLanes, ALaunchedRanksThreadsAreNotNamedTwice) {
  EXPECT_EQ(dpv::lane_thread_label("rank 1", "rank 1 (cpu:0)"), "cpu:0");
  EXPECT_EQ(dpv::lane_thread_label("rank 1", "rank 1 communication thread"), "communication thread");
  EXPECT_EQ(dpv::lane_thread_label("rank 1", "rank 1 (cpu:0) communication"), "cpu:0 communication");
  EXPECT_EQ(dpv::lane_thread_label("rank 1", "rank 10 (cpu:0)"), "rank 10 (cpu:0)");
  EXPECT_EQ(dpv::lane_thread_label("dpviz DDP", "GPU 0 (simulated on CPU)"), "GPU 0 (simulated on CPU)");
  EXPECT_EQ(dpv::lane_thread_label("rank 1", "rank 1 "), "rank 1 ");
}
