#pragma once
// A Chrome trace read back as lanes of spans, for drawing: one lane per (process, thread) of the
// trace, in the order the trace asks for (process_sort_index, thread_sort_index, then ids). A
// merged multi-process trace (dpv trace merge) gives one group of lanes per rank.
#include <functional>
#include <string>
#include <vector>

namespace dpv {

struct TraceLane {
  int pid = 0, tid = 0;
  std::string process;  // process_name ("rank 1: dpviz DDP"), or "process <pid>"
  std::string thread;   // thread_name ("cpu:0"), or "thread <tid>"
  // The same, short, for a row label "rank 1 · cpu:0": the process name up to its ':' ("rank 1"),
  // and the thread name without a repeat of it (lane_thread_label).
  std::string process_label;
  std::string thread_label;
};

// A launched rank names its threads after itself ("rank 1 (cpu:0)", "rank 1 communication
// thread"): under "rank 1 ·" that is said once ("cpu:0", "communication thread"); "rank 1 (cpu:0)
// communication" is "cpu:0 communication". A thread not named after `process` keeps its name.
std::string lane_thread_label(const std::string& process, const std::string& thread);

struct TraceSpan {
  int lane = 0;          // index into TraceLanes::lanes
  std::string name;      // the event's name (a stage title)
  std::string category;  // "cat" ("forward", "backward", ...), may be empty
  double start_us = 0, duration_us = 0;
  std::string args;      // the event's args as compact JSON, for hover text
};

struct TraceLanes {
  std::vector<TraceLane> lanes;
  std::vector<TraceSpan> spans;  // complete events ("ph": "X") only
  int processes = 0;
  double end_us = 0;  // the latest span end
};

// Asked every few thousand JSON objects and events while a trace is read: true stops the read.
// The app reads a large trace off its GUI thread and lets the learner cancel it.
using TraceReadCancelled = std::function<bool()>;

// Throws dpv::Error naming `source` when the text is not a Chrome trace, and (ValueError) "reading
// <source> was cancelled" as soon as `cancelled` (when given) says so.
TraceLanes read_trace_lanes(const std::string& json_text, const std::string& source,
                            const TraceReadCancelled& cancelled = {});

}  // namespace dpv
