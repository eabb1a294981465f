#include "engine/trace.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/io/atomic_file.h"

namespace dpv {
namespace {

using Json = nlohmann::ordered_json;

// One process holds every track: the host (the thread driving DataParallel) and one per device.
constexpr int kProcessId = 1;
constexpr int kHostTrack = 0;
int device_track(int device) { return device + 1; }
// DDP: each rank's communication thread (bucket all-reduces) gets a lane below the compute lanes.
int comm_track(int device) { return 1000 + device; }

constexpr double kMicrosecondsPerSecond = 1e6;

Json metadata_event(const char* name, int tid, Json args) {
  return Json{{"name", name}, {"ph", "M"}, {"pid", kProcessId}, {"tid", tid}, {"args", std::move(args)}};
}

Json collectives_json(const std::vector<CollectiveReport>& reports) {
  Json list = Json::array();
  for (const CollectiveReport& r : reports) {
    list.push_back(Json{{"op", collective_op_name(r.op)},
                        {"ranks", r.ranks},
                        {"bytes", r.bytes},
                        {"seconds", r.seconds},
                        {"algbw_GBps", r.algbw},
                        {"busbw_GBps", r.busbw}});
  }
  return list;
}

// The end of an event on the iteration clock: the stage's end or its last busy device, whichever is later.
double event_end(const StageEvent& e) {
  double end = e.t_end;
  for (const DeviceState& d : e.devices) end = std::max(end, d.busy_end);
  return end;
}

}  // namespace

void TraceRecorder::on_stage(const StageEvent& event) {
  events_.push_back(event);
  offsets_.push_back(base_);
  last_end_ = std::max(last_end_, base_ + event_end(event));
}

void TraceRecorder::begin_iteration() { base_ = last_end_; }

void TraceRecorder::clear() {
  events_.clear();
  offsets_.clear();
  base_ = 0;
  last_end_ = 0;
}

std::string TraceRecorder::to_json() const {
  Json trace_events = Json::array();

  // Track names: the host first, then every device seen, labelled as the engine labels it.
  std::map<int, std::string> device_labels;
  for (const StageEvent& e : events_)
    for (const DeviceState& d : e.devices)
      if (!device_labels.count(d.device))
        device_labels[d.device] = d.label.empty() ? "device " + std::to_string(d.device) : d.label;
  trace_events.push_back(metadata_event("process_name", kHostTrack, Json{{"name", process_name_}}));
  trace_events.push_back(metadata_event("thread_name", kHostTrack, Json{{"name", "host"}}));
  trace_events.push_back(metadata_event("thread_sort_index", kHostTrack, Json{{"sort_index", 0}}));
  for (const auto& [device, label] : device_labels) {
    trace_events.push_back(metadata_event("thread_name", device_track(device), Json{{"name", label}}));
    trace_events.push_back(
        metadata_event("thread_sort_index", device_track(device), Json{{"sort_index", 2 * device_track(device)}}));
  }

  std::map<int, bool> comm_devices;
  for (const StageEvent& e : events_)
    for (const CommSpan& c : e.comm) comm_devices[c.device] = true;
  for (const auto& [device, unused] : comm_devices) {
    const std::string label = device_labels.count(device) ? device_labels[device] : "rank " + std::to_string(device);
    trace_events.push_back(metadata_event("thread_name", comm_track(device), Json{{"name", label + " communication"}}));
    // Sorted right under the rank's compute lane, so the overlap with its backward is visible.
    trace_events.push_back(
        metadata_event("thread_sort_index", comm_track(device), Json{{"sort_index", 2 * device_track(device) + 1}}));
  }

  for (size_t i = 0; i < events_.size(); ++i) {
    const StageEvent& e = events_[i];
    const double offset = offsets_[i];
    const char* kind = stage_kind_name(e.stage.kind);
    const Json collectives = collectives_json(e.collectives);

    // The host track spans the whole stage and carries what the stage did as a whole.
    Json host_args{{"stage", e.index}, {"bytes_moved", e.bytes_moved}, {"collectives", collectives}};
    if (e.stage.layer >= 0) host_args["layer"] = e.stage.layer;
    if (!e.chunk_sizes.empty()) host_args["chunk_sizes"] = e.chunk_sizes;
    if (e.loss) host_args["loss"] = *e.loss;
    if (!e.summary.empty()) host_args["summary"] = e.summary;
    trace_events.push_back(Json{{"name", e.stage.title},
                                {"cat", kind},
                                {"ph", "X"},
                                {"pid", kProcessId},
                                {"tid", kHostTrack},
                                {"ts", (offset + e.t_start) * kMicrosecondsPerSecond},
                                {"dur", std::max(0.0, e.t_end - e.t_start) * kMicrosecondsPerSecond},
                                {"args", std::move(host_args)}});

    for (const DeviceState& d : e.devices) {
      if (!(d.busy_end > d.busy_start)) continue;  // idle in this stage: no bar
      Json args{{"stage", e.index},
                {"bytes_moved", e.bytes_moved},
                {"collectives", collectives},
                {"chunk_rows", d.chunk_rows},
                {"memory_bytes", d.memory_bytes},
                {"memory_peak", d.memory_peak}};
      trace_events.push_back(Json{{"name", e.stage.title},
                                  {"cat", kind},
                                  {"ph", "X"},
                                  {"pid", kProcessId},
                                  {"tid", device_track(d.device)},
                                  {"ts", (offset + d.busy_start) * kMicrosecondsPerSecond},
                                  {"dur", (d.busy_end - d.busy_start) * kMicrosecondsPerSecond},
                                  {"args", std::move(args)}});
    }
    // Bucket all-reduces where they really ran: on the communication thread, overlapping
    // the Backward stages that came after their launch.
    for (const CommSpan& c : e.comm) {
      Json ring = Json::array();
      for (const RingStep& st : c.ring)
        ring.push_back(Json{{"phase", st.phase}, {"step", st.step}, {"send_to", st.send_to},
                            {"recv_from", st.recv_from}, {"send_chunk", st.send_chunk}, {"recv_chunk", st.recv_chunk},
                            {"bytes", st.bytes}, {"seconds", st.seconds}});
      Json args{{"bucket", c.bucket}, {"bytes", c.bytes}, {"params", c.params},
                {"launched_at_us", (offset + c.t_launch) * kMicrosecondsPerSecond},
                {"collectives", collectives_json({c.report})}, {"ring_steps", std::move(ring)}};
      trace_events.push_back(Json{{"name", "all-reduce bucket " + std::to_string(c.bucket)},
                                  {"cat", "allreduce"},
                                  {"ph", "X"},
                                  {"pid", kProcessId},
                                  {"tid", comm_track(c.device)},
                                  {"ts", (offset + c.t_start) * kMicrosecondsPerSecond},
                                  {"dur", std::max(0.0, c.t_end - c.t_start) * kMicrosecondsPerSecond},
                                  {"args", std::move(args)}});
    }
  }

  Json root{{"traceEvents", std::move(trace_events)}, {"displayTimeUnit", "ms"}};
  // Replace rather than throw on odd bytes in titles or labels: a trace is for looking at.
  return root.dump(1, ' ', false, Json::error_handler_t::replace);
}

void TraceRecorder::save(const std::string& path) const { write_file_atomic(path, to_json()); }

}  // namespace dpv
