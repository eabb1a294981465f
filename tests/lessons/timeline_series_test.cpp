// course/timeline_series.h: the Timeline page's median and spread over several timed iterations,
// the speed-up against one device, and whether simulated devices share fewer cores.
#include <gtest/gtest.h>

#include "course/sample_program.h"
#include "course/timeline_series.h"
#include "engine/error.h"
#include "engine/model_data.h"
#include "engine/model_spec.h"

namespace dpv::course {
namespace {

TEST(SpreadOf, MedianMinAndMax) {
  const Spread odd = spread_of({5, 1, 3});
  EXPECT_DOUBLE_EQ(odd.median, 3);
  EXPECT_DOUBLE_EQ(odd.min, 1);
  EXPECT_DOUBLE_EQ(odd.max, 5);
  const Spread even = spread_of({4, 1, 2, 10});
  EXPECT_DOUBLE_EQ(even.median, 3);
  EXPECT_DOUBLE_EQ(even.max, 10);
  const Spread none = spread_of({});
  EXPECT_DOUBLE_EQ(none.median, 0);
  EXPECT_DOUBLE_EQ(none.max, 0);
}

Dataset batchFor(const std::string& preset, int64_t rows) { return make_data_for_model(preset_model(preset), rows, 7); }

TEST(MeasureTimeline, SummarisesEveryTimedIterationPerStageAndDevice) {
  TimelineConfig config;
  config.run.devices = "cpu:2";
  config.run.preset = "simple";
  config.iterations = 5;
  const TimelineSeries series = measure_timeline(config, batchFor("simple", 10));
  ASSERT_EQ(series.totals.size(), 5u);
  // Each device's name and detail as the engine gives them, the parts the page lays out.
  ASSERT_EQ(series.device_titles.size(), 2u);
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(series.device_titles[static_cast<size_t>(d)].name, "GPU " + std::to_string(d));
    EXPECT_EQ(series.device_titles[static_cast<size_t>(d)].detail, "simulated on CPU");
    EXPECT_TRUE(series.device_titles[static_cast<size_t>(d)].simulated);
  }
  EXPECT_TRUE(series.simulated);
  EXPECT_EQ(series.device_count, 2);
  EXPECT_GT(series.host_cores, 0u);
  EXPECT_EQ(series.total.median, spread_of(series.totals).median);
  EXPECT_LE(series.total.min, series.total.median);
  EXPECT_GE(series.total.max, series.total.median);
  ASSERT_FALSE(series.stages.empty());
  EXPECT_EQ(series.stages.front().stage.kind, StageKind::Scatter);
  EXPECT_EQ(series.stages.back().stage.kind, StageKind::Step);
  EXPECT_EQ(series.median_events.size(), series.stages.size());
  bool forwardOnBoth = false;
  for (const TimedStage& s : series.stages) {
    EXPECT_LE(s.span.min, s.span.median);
    EXPECT_LE(s.span.median, s.span.max);
    for (const DeviceSpan& d : s.devices) {
      EXPECT_GE(d.busy.min, 0);
      EXPECT_LE(d.busy.median, d.busy.max);
      EXPECT_LT(d.device, 2);
    }
    if (s.stage.kind == StageKind::Forward && s.devices.size() == 2) forwardOnBoth = true;
  }
  EXPECT_TRUE(forwardOnBoth) << "both replicas run each forward layer";
  // The speed-up is the one-device median over this median, both measured.
  EXPECT_GT(series.one_device_total.median, 0);
  EXPECT_DOUBLE_EQ(series.speedup, series.one_device_total.median / series.total.median);
  // Two simulated devices: the machine's limit measured beside, and the efficiency against it.
  ASSERT_TRUE(series.simulated);
  ASSERT_EQ(series.device_count, 2);
  ASSERT_GT(series.machine_speedup, 0);
  EXPECT_DOUBLE_EQ(series.efficiency, series.speedup / series.machine_speedup);
}

TEST(MeasureTimeline, OneDeviceIsItsOwnBaseline) {
  TimelineConfig config;
  config.run.devices = "cpu:1";
  config.iterations = 3;
  const TimelineSeries series = measure_timeline(config, batchFor("simple", 4));
  EXPECT_DOUBLE_EQ(series.speedup, 1.0);
  EXPECT_FALSE(series.threads_share_cores());
}

TEST(MeasureTimeline, SaysWhenSimulatedDevicesOutnumberTheCores) {
  TimelineSeries s;
  s.simulated = true;
  s.device_count = 8;
  s.host_cores = 2;
  EXPECT_TRUE(s.threads_share_cores());
  s.host_cores = 8;
  EXPECT_FALSE(s.threads_share_cores());
  s.host_cores = 2;
  s.simulated = false;  // GPUs are not threads of the host
  EXPECT_FALSE(s.threads_share_cores());
}

TEST(MeasureTimeline, StopsWhenAskedAndRejectsBadCounts) {
  TimelineConfig config;
  config.run.devices = "cpu:2";
  config.iterations = 6;
  int asked = 0;
  const TimelineSeries series = measure_timeline(config, batchFor("simple", 6), [&] { return ++asked < 3; });
  EXPECT_LT(series.totals.size(), 6u);
  config.iterations = 0;
  EXPECT_THROW(measure_timeline(config, batchFor("simple", 6)), Error);
}

}  // namespace
}  // namespace dpv::course

namespace dpv::course {
namespace {

StageEvent eventAt(StageKind kind, double start, double end) {
  StageEvent e;
  e.stage.kind = kind;
  e.t_start = start;
  e.t_end = end;
  return e;
}

// The app's DDP iteration: its clock started when the iteration was prepared (14 s before the first
// step), the learner paused 6 s before Forward, and iteration 1 began with DDP's construction.
TEST(MeasuredWork, LeavesOutTheWaitTheLearnersPausesAndDdpsConstruction) {
  std::vector<StageEvent> events{eventAt(StageKind::Construct, 0.0, 0.005), eventAt(StageKind::Sample, 14.0, 14.001),
                                 eventAt(StageKind::Forward, 20.0, 20.002)};
  DeviceState busy;
  busy.busy_start = 14.0002;
  busy.busy_end = 14.0008;
  events[1].devices.push_back(busy);
  CommSpan allreduce;
  allreduce.t_start = 20.0015;
  allreduce.t_end = 20.003;  // outlives its stage: still work
  events[2].comm.push_back(allreduce);

  const IterationWork work = measured_work(events);
  EXPECT_DOUBLE_EQ(work.construct_seconds, 0.005);
  ASSERT_EQ(work.events.size(), 2u);  // no Construct
  EXPECT_NEAR(work.events[0].t_start, 0.0, 1e-12);
  EXPECT_NEAR(work.events[0].t_end, 0.001, 1e-9);
  EXPECT_NEAR(work.events[0].devices[0].busy_start, 0.0002, 1e-9);
  EXPECT_NEAR(work.events[0].devices[0].busy_end, 0.0008, 1e-9);
  EXPECT_NEAR(work.events[1].t_start, 0.001, 1e-9);  // right after Sample: the pause is gone
  EXPECT_NEAR(work.events[1].comm[0].t_end, 0.004, 1e-9);
  EXPECT_NEAR(work.seconds, 0.004, 1e-9);
  EXPECT_NEAR(work.idle_seconds, 14.0 + 5.999, 1e-9);
}

// "Measure" times the strategy the run names: the Iteration page's DDP mode gives DDP's stages.
TEST(MeasureTimeline, MeasuresDdpWhenTheRunIsDdp) {
  TimelineConfig config;
  config.run.devices = "cpu:2";
  config.run.preset = "simple";
  config.run.strategy = StrategyKind::DistributedDataParallel;
  config.iterations = 3;
  const TimelineSeries series = measure_timeline(config, program_data("simple", 10, 0));
  ASSERT_EQ(series.totals.size(), 3u);
  EXPECT_EQ(series.config.run.strategy, StrategyKind::DistributedDataParallel);
  bool finalize = false, scatter = false;
  for (const TimedStage& s : series.stages) {
    finalize |= s.stage.kind == StageKind::Finalize;
    scatter |= s.stage.kind == StageKind::Scatter;
    EXPECT_NE(s.stage.kind, StageKind::Construct);  // the warm-up constructed DDP; it is not timed
  }
  EXPECT_TRUE(finalize);
  EXPECT_FALSE(scatter);
  EXPECT_GT(series.one_device_total.median, 0);
}

}  // namespace
}  // namespace dpv::course
