// Chrome trace JSON from recorded stage events: tracks, complete events, times and collective args.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/io/atomic_file.h"
#include "engine/io/input_file.h"
#include "engine/trace.h"

using nlohmann::json;

namespace {

dpv::DeviceState device(int index, double start, double end) {
  dpv::DeviceState d;
  d.device = index;
  d.label = "GPU " + std::to_string(index) + " (simulated on CPU)";
  d.has_replica = true;
  d.chunk_rows = 4;
  d.busy_start = start;
  d.busy_end = end;
  return d;
}

// Scatter: both devices busy; Forward: device 1 idle.
std::vector<dpv::StageEvent> one_iteration() {
  dpv::StageEvent scatter;
  scatter.index = 0;
  scatter.stage = {dpv::StageKind::Scatter, -1, "Scatter input"};
  scatter.t_start = 0.0;
  scatter.t_end = 0.002;
  scatter.chunk_sizes = {4, 4};
  scatter.bytes_moved = 640;
  scatter.devices = {device(0, 0.0, 0.001), device(1, 0.0005, 0.002)};
  dpv::CollectiveReport bc;
  bc.op = dpv::CollectiveOp::Broadcast;
  bc.ranks = 2;
  bc.bytes = 320;
  bc.seconds = 0.001;
  bc.algbw = 0.00032;
  bc.busbw = 0.00032;
  scatter.collectives = {bc};

  dpv::StageEvent forward;
  forward.index = 1;
  forward.stage = {dpv::StageKind::Forward, 0, "Forward 0: Linear(10, 2)"};
  forward.t_start = 0.002;
  forward.t_end = 0.005;
  forward.devices = {device(0, 0.002, 0.005), device(1, 0.004, 0.004)};
  forward.loss = 0.69;
  return {scatter, forward};
}

std::vector<json> events_with(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : trace.at("traceEvents"))
    if (e.at("ph") == ph) out.push_back(e);
  return out;
}

// The track (tid) whose thread_name is `name`.
int track_named(const json& trace, const std::string& name) {
  for (const json& e : events_with(trace, "M"))
    if (e.at("name") == "thread_name" && e.at("args").at("name") == name) return e.at("tid").get<int>();
  return -100;
}

}  // namespace

TEST(TraceTest, NamesOneTrackPerDeviceAndAHostTrack) {
  dpv::TraceRecorder rec;
  for (const auto& e : one_iteration()) rec.on_stage(e);
  const json trace = json::parse(rec.to_json());
  EXPECT_EQ(trace.at("displayTimeUnit"), "ms");
  const int host = track_named(trace, "host");
  const int gpu0 = track_named(trace, "GPU 0 (simulated on CPU)");
  const int gpu1 = track_named(trace, "GPU 1 (simulated on CPU)");
  EXPECT_NE(host, -100);
  EXPECT_NE(gpu0, -100);
  EXPECT_NE(gpu1, -100);
  EXPECT_NE(host, gpu0);
  EXPECT_NE(gpu0, gpu1);
  std::string process_name;
  for (const json& e : events_with(trace, "M"))
    if (e.at("name") == "process_name") process_name = e.at("args").at("name");
  EXPECT_EQ(process_name, "dpviz DataParallel");
  rec.set_process_name("dpviz DDP");
  for (const json& e : events_with(json::parse(rec.to_json()), "M"))
    if (e.at("name") == "process_name") { EXPECT_EQ(e.at("args").at("name"), "dpviz DDP"); }
}

TEST(TraceTest, OneCompleteEventPerBusyDevicePlusTheHostSpan) {
  dpv::TraceRecorder rec;
  for (const auto& e : one_iteration()) rec.on_stage(e);
  ASSERT_EQ(rec.events().size(), 2u);
  const json trace = json::parse(rec.to_json());
  const int host = track_named(trace, "host");
  const int gpu1 = track_named(trace, "GPU 1 (simulated on CPU)");
  const auto complete = events_with(trace, "X");
  // Scatter: host + 2 devices; Forward: host + device 0 (device 1 idle).
  ASSERT_EQ(complete.size(), 5u);
  int device_events = 0;
  for (const json& e : complete) {
    if (e.at("tid") != host) ++device_events;
    EXPECT_TRUE(e.at("ts").is_number());
    EXPECT_GE(e.at("dur").get<double>(), 0.0);
  }
  EXPECT_EQ(device_events, 3);

  // Device 1 in the scatter: 0.5 ms to 2 ms, in microseconds.
  const json* scatter_gpu1 = nullptr;
  for (const json& e : complete)
    if (e.at("tid") == gpu1 && e.at("name") == "Scatter input") scatter_gpu1 = &e;
  ASSERT_NE(scatter_gpu1, nullptr);
  EXPECT_NEAR(scatter_gpu1->at("ts").get<double>(), 500.0, 1e-9);
  EXPECT_NEAR(scatter_gpu1->at("dur").get<double>(), 1500.0, 1e-9);
  EXPECT_EQ(scatter_gpu1->at("cat"), dpv::stage_kind_name(dpv::StageKind::Scatter));
  const json& args = scatter_gpu1->at("args");
  EXPECT_EQ(args.at("bytes_moved"), 640);
  ASSERT_EQ(args.at("collectives").size(), 1u);
  EXPECT_EQ(args.at("collectives")[0].at("op"), "broadcast");
  EXPECT_EQ(args.at("collectives")[0].at("bytes"), 320);
  EXPECT_DOUBLE_EQ(args.at("collectives")[0].at("seconds").get<double>(), 0.001);
  EXPECT_DOUBLE_EQ(args.at("collectives")[0].at("algbw_GBps").get<double>(), 0.00032);
  EXPECT_DOUBLE_EQ(args.at("collectives")[0].at("busbw_GBps").get<double>(), 0.00032);

  // No bar for the idle device in the forward stage.
  for (const json& e : complete) EXPECT_FALSE(e.at("tid") == gpu1 && e.at("name") == "Forward 0: Linear(10, 2)");
}

TEST(TraceTest, IterationsAreLaidEndToEnd) {
  dpv::TraceRecorder rec;
  for (const auto& e : one_iteration()) rec.on_stage(e);
  rec.begin_iteration();
  for (const auto& e : one_iteration()) rec.on_stage(e);
  const json trace = json::parse(rec.to_json());
  const int gpu0 = track_named(trace, "GPU 0 (simulated on CPU)");
  std::vector<double> starts;
  for (const json& e : events_with(trace, "X"))
    if (e.at("tid") == gpu0 && e.at("name") == "Scatter input") starts.push_back(e.at("ts").get<double>());
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_NEAR(starts[0], 0.0, 1e-9);
  EXPECT_NEAR(starts[1], 5000.0, 1e-6);  // the first iteration ended at 5 ms
  // Every event of the second iteration starts at or after the first one's end.
  double first_end = 0;
  const auto complete = events_with(trace, "X");
  for (size_t i = 0; i < complete.size() / 2; ++i)
    first_end = std::max(first_end, complete[i].at("ts").get<double>() + complete[i].at("dur").get<double>());
  for (size_t i = complete.size() / 2; i < complete.size(); ++i)
    EXPECT_GE(complete[i].at("ts").get<double>() + 1e-9, first_end);
}

TEST(TraceTest, SaveWritesParsableJsonAndClearForgets) {
  dpv::TraceRecorder rec;
  for (const auto& e : one_iteration()) rec.on_stage(e);
  std::random_device rd;
  const auto path = std::filesystem::temp_directory_path() / ("dpv-trace-" + std::to_string(rd()) + ".json");
  rec.save(path.string());
  const json saved = json::parse(dpv::read_file(path.string(), dpv::kTraceInput));
  std::filesystem::remove(path);
  EXPECT_EQ(events_with(saved, "X").size(), 5u);

  rec.clear();
  EXPECT_TRUE(rec.events().empty());
  const json empty = json::parse(rec.to_json());
  EXPECT_TRUE(events_with(empty, "X").empty());
  // After clear, times start from zero again.
  for (const auto& e : one_iteration()) rec.on_stage(e);
  const auto complete = events_with(json::parse(rec.to_json()), "X");
  double earliest = 1e300;
  for (const json& e : complete) earliest = std::min(earliest, e.at("ts").get<double>());
  EXPECT_NEAR(earliest, 0.0, 1e-9);
}
