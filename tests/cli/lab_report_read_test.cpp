// `dpv lab network --json`'s report (cli/lab_report.h) read back by the app (course/network_real.h
// read_lab_network_report): the same writer the lab uses, through a file, into typed points; rank
// 0's last step (engine/netmodel/step_measure_json.h, shared with the step log) comes back whole.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "cli/lab_report.h"
#include "course/network_real.h"
#include "engine/io/atomic_file.h"

namespace dpv::testing {
namespace {

netmodel::StepMeasure measured_step() {
  netmodel::StepMeasure m;
  m.step_s = 0.125;
  m.exposed_s = 0.0625;
  m.bytes = 4096;
  m.sent_bytes = 2048;
  m.backward_end_s = 0.05;
  m.facts.forward_s = 0.01;
  m.facts.backward_s = {0.02, 0.015, 0.005};
  m.facts.after_backward_s = 0.0125;
  for (int i = 0; i < 2; ++i) {
    netmodel::MeasuredBucket b;
    b.buffer_bytes = 2048;
    b.sent_bytes = 1024;
    b.facts.ready_layer = 2 - 2 * i;
    b.facts.bytes = netmodel::link_bytes(b.buffer_bytes, b.sent_bytes);
    b.start = 0.03 + 0.04 * i;
    b.end = 0.07 + 0.04 * i;
    m.buckets.push_back(b);
    m.facts.buckets.push_back(b.facts);
  }
  return m;
}

class LabReportRead : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  std::string path_ = (std::filesystem::temp_directory_path() /
                       ("dpv-lab-report-read-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                        ".json")).string();
};

TEST_F(LabReportRead, ThePointsAndTheLastStepComeBackTyped) {
  cli::LabReport report;
  report.nproc_per_node = 2;
  report.world = 4;
  report.netem = true;
  cli::LabPointResult point;
  point.point = cli::LabPoint{cli::LinkShape{100e6, 0.002, 0}, 0.5, "fp16"};
  point.summary = {.steps_measured = 3, .step_s = 0.125, .predicted_step_s = 0.1, .exposed_s = 0.0625,
                   .predicted_exposed_s = 0.05, .bytes_per_step = 2048, .saved_bytes_per_step = 2048,
                   .ratio = 1.25, .hook_error = HookErrorMeasure{2e-6, 8.0, 1e-3, 4096}};
  point.last_step = measured_step();
  report.points.push_back(point);
  write_file_atomic(path_, cli::lab_report_json(report));

  const course::LabNetworkReport read = course::read_lab_network_report(path_);
  EXPECT_FALSE(read.simulated);
  EXPECT_TRUE(read.netem);
  EXPECT_EQ(read.world, 4);
  ASSERT_EQ(read.points.size(), 1u);
  const course::NetworkLabPoint& p = read.points[0];
  EXPECT_FALSE(p.simulated);
  EXPECT_TRUE(p.netem);
  EXPECT_DOUBLE_EQ(p.link.bandwidth_bytes_per_s * 8, 100e6);
  EXPECT_DOUBLE_EQ(p.link.latency_s, 0.002);
  EXPECT_EQ(p.comm_hook.kind, CommHookKind::Fp16Compress);
  EXPECT_EQ(p.summary.steps_measured, 3u);
  EXPECT_DOUBLE_EQ(p.summary.step_s, 0.125);
  EXPECT_DOUBLE_EQ(p.summary.predicted_step_s, 0.1);
  EXPECT_DOUBLE_EQ(p.summary.ratio, 1.25);
  EXPECT_DOUBLE_EQ(p.summary.bytes_per_step, 2048);
  EXPECT_DOUBLE_EQ(p.summary.saved_bytes_per_step, 2048);
  ASSERT_TRUE(p.summary.hook_error.has_value());  // the probed step's sums, as the lab measured them
  EXPECT_EQ(*p.summary.hook_error, (HookErrorMeasure{2e-6, 8.0, 1e-3, 4096}));
  ASSERT_EQ(p.last_step_by_rank.size(), 1u);
  const netmodel::StepMeasure& got = p.last_step_by_rank[0];
  const netmodel::StepMeasure want = measured_step();
  EXPECT_EQ(got.step_s, want.step_s);
  EXPECT_EQ(got.exposed_s, want.exposed_s);
  EXPECT_EQ(got.bytes, want.bytes);
  EXPECT_EQ(got.sent_bytes, want.sent_bytes);
  EXPECT_EQ(got.facts.backward_s, want.facts.backward_s);
  EXPECT_EQ(got.facts.world, 4);
  ASSERT_EQ(got.buckets.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got.buckets[i].start, want.buckets[i].start);
    EXPECT_EQ(got.buckets[i].end, want.buckets[i].end);
    EXPECT_EQ(got.buckets[i].facts.ready_layer, want.buckets[i].facts.ready_layer);
    EXPECT_EQ(got.buckets[i].facts.bytes, 1024u);  // what crossed the link: the hook's bytes
  }
  EXPECT_NE(course::network_link_text(p).find("netem delay 2ms"), std::string::npos) << course::network_link_text(p);
}

TEST_F(LabReportRead, ASimulatedLabSaysSoWithItsReason) {
  cli::LabReport report;
  report.simulated = true;
  report.simulated_reason = "--simulated was given";
  cli::LabPointResult point;
  point.point = cli::LabPoint{cli::LinkShape{10e6, 0, 0}, 25, ""};
  point.summary.steps_measured = 1;
  point.last_step = measured_step();
  report.points.push_back(point);
  write_file_atomic(path_, cli::lab_report_json(report));
  const course::LabNetworkReport read = course::read_lab_network_report(path_);
  ASSERT_EQ(read.points.size(), 1u);
  EXPECT_TRUE(read.points[0].simulated);
  EXPECT_EQ(read.points[0].simulated_reason, "--simulated was given");
  EXPECT_EQ(read.points[0].comm_hook.kind, CommHookKind::None);
}

}  // namespace
}  // namespace dpv::testing
