// The real shaped link for the app (course/network_real.h): the lab's exact arguments and the
// shell text the page shows for them, the plan that picks the real or the simulated link from
// typed facts (privilege, dpv binary, netem), the reader of a report the real lab wrote
// (tests/fixtures/network, from `dpv lab network --json` on a shaped veth pair) and the sentence
// about the link, written from a point's facts.
#include <gtest/gtest.h>

#include "course/network_guess.h"
#include "course/network_real.h"
#include "course_test_util.h"
#include "engine/error.h"
#include "engine/model_spec.h"

namespace dpv::course {
namespace {

using testing::TempDir;

NetworkLabSetup four_ranks_powersgd() {
  NetworkLabSetup setup;
  setup.model = preset_model("mlp-bn");
  setup.world = 4;
  setup.bucket_cap_mb = 0.5;
  setup.comm_hook.kind = CommHookKind::PowerSgd;
  return setup;
}

TEST(NetworkReal, TheLabArgumentsFollowTheSetup) {
  const std::vector<std::string> args =
      lab_network_arguments(four_ranks_powersgd(), "mlp-bn", {0.002, 100e6 / 8}, "/tmp/a b/lab.json");
  const std::vector<std::string> expected{
      "lab", "network", "--nproc-per-node", "2", "--rate", "100mbit", "--delay", "2ms", "--bucket-cap-mb", "0.5",
      "--comm-hook", "powersgd", "--json", "/tmp/a b/lab.json", "--", "train", "--ddp", "--preset", "mlp-bn",
      "--batch", "64", "--steps", "6", "--seed", "0"};
  EXPECT_EQ(args, expected);
  NetworkLabSetup odd = four_ranks_powersgd();
  odd.world = 3;
  EXPECT_THROW(lab_network_arguments(odd, "mlp-bn", {0, 1e6}, ""), Error);
}

TEST(NetworkReal, TheShownCommandIsTheRunArgumentsQuoted) {
  const std::vector<std::string> args = lab_network_arguments(four_ranks_powersgd(), "mlp-bn", {0.002, 100e6 / 8}, "");
  EXPECT_EQ(real_link_command(four_ranks_powersgd(), "mlp-bn", {0.002, 100e6 / 8}), "sudo " + shell_command("dpv", args));
  EXPECT_EQ(shell_command("/opt/my dpv/dpv", {"--json", "it's.json", ""}),
            "'/opt/my dpv/dpv' --json 'it'\\''s.json' ''");
}

TEST(NetworkReal, TheNetemProbeIsOneStepWithoutDelay) {
  const std::vector<std::string> args = netem_probe_arguments(four_ranks_powersgd(), "mlp-bn", {0.002, 100e6 / 8}, "p.json");
  const std::vector<std::string> expected{
      "lab", "network", "--nproc-per-node", "2", "--rate", "100mbit", "--delay", "0ms", "--bucket-cap-mb", "0.5",
      "--json", "p.json", "--", "train", "--ddp", "--preset", "mlp-bn", "--batch", "64", "--steps", "1", "--seed", "0"};
  EXPECT_EQ(args, expected);
}

TEST(NetworkReal, ThePlanPicksTheLinkFromTypedFacts) {
  RealLinkFacts facts;
  facts.privileged = true;
  facts.dpv_exe = "/usr/bin/dpv";
  const netmodel::Link no_delay{0, 1e9 / 8}, delayed{0.001, 1e9 / 8};
  EXPECT_TRUE(plan_network_run(true, facts, no_delay).real);
  EXPECT_FALSE(plan_network_run(true, facts, no_delay).probe_netem);
  NetworkRunPlan plan = plan_network_run(true, facts, delayed);  // netem not known yet: ask the lab first
  EXPECT_TRUE(plan.real && plan.probe_netem);
  facts.netem = true;
  plan = plan_network_run(true, facts, delayed);
  EXPECT_TRUE(plan.real && !plan.probe_netem);
  facts.netem = false;
  plan = plan_network_run(true, facts, delayed);
  EXPECT_FALSE(plan.real);
  EXPECT_NE(plan.simulated_reason.find("no netem"), std::string::npos) << plan.simulated_reason;
  EXPECT_TRUE(plan_network_run(true, facts, no_delay).real);  // tbf alone needs no netem
  plan = plan_network_run(false, facts, no_delay);  // the learner chose the simulated link
  EXPECT_FALSE(plan.real);
  EXPECT_TRUE(plan.simulated_reason.empty());
  facts.dpv_exe.clear();
  facts.dpv_missing_reason = "no dpv binary here";
  EXPECT_EQ(plan_network_run(true, facts, no_delay).simulated_reason, "no dpv binary here");
  facts.privileged = false;
  plan = plan_network_run(true, facts, no_delay);
  EXPECT_FALSE(plan.real);
  EXPECT_NE(plan.simulated_reason.find("CAP_NET_ADMIN"), std::string::npos);
  EXPECT_EQ(why_no_real_link(facts), plan.simulated_reason);
}

TEST(NetworkReal, ReadsTheRealLabsReport) {
  const LabNetworkReport report = read_lab_network_report(std::string(DPV_TEST_DATA_DIR) + "/network/lab_report_real.json");
  EXPECT_FALSE(report.simulated);
  EXPECT_EQ(report.world, 2);
  ASSERT_EQ(report.points.size(), 1u);
  const NetworkLabPoint& p = report.points[0];
  EXPECT_FALSE(p.simulated);
  EXPECT_EQ(p.world, 2);
  EXPECT_DOUBLE_EQ(p.link.bandwidth_bytes_per_s, 1e9 / 8);
  EXPECT_EQ(p.link.latency_s, 0);
  EXPECT_EQ(p.comm_hook.kind, CommHookKind::None);
  ASSERT_EQ(p.last_step_by_rank.size(), 1u);  // rank 0's: the lab logs no other rank
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_GE(p.last_step_by_rank[0].buckets.size(), 1u);
  EXPECT_GT(p.summary.step_s, 0);
  EXPECT_GT(p.summary.predicted_step_s, 0);
  const std::string text = network_link_text(p);
  EXPECT_EQ(text.rfind("Real shaped link: 2 network namespaces", 0), 0u) << text;
  EXPECT_NE(text.find("tc tbf at 1gbit"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 0 alone"), std::string::npos) << text;
  EXPECT_EQ(text.find("netem"), std::string::npos) << text;  // none applied
}

TEST(NetworkReal, RefusesWhatIsNotAReportOrLacksTheLastStep) {
  const TempDir dir;
  EXPECT_THROW(read_lab_network_report(dir.write("steps.json", R"({"format": "dpv-ddp-steps", "version": 1})")), Error);
  const std::string old = dir.write("old.json", R"({"format": "dpv-lab-network", "version": 1, "world": 2,
      "simulated": false, "netem": false, "points": [{"rate_bits_per_s": 1e9, "delay_s": 0, "steps_measured": 2,
      "step_ms": 1, "predicted_step_ms": 1, "ratio": 1, "exposed_ms": 0, "predicted_exposed_ms": 0,
      "bytes_per_step": 10}]})");
  try {
    read_lab_network_report(old);
    FAIL() << "a report without last_step was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("last_step"), std::string::npos) << e.what();
  }
}

TEST(NetworkReal, ASimulatedPointSaysWhyItIsNotTheRealLink) {
  NetworkLabPoint p;
  p.world = 2;
  p.link = {0.001, 10e6 / 8};
  p.simulated_reason = "this kernel has no netem qdisc";
  const std::string text = network_link_text(p);
  EXPECT_EQ(text.rfind("Simulated link: 10mbit, 1ms one-way", 0), 0u) << text;
  EXPECT_NE(text.find("Not the real link: this kernel has no netem qdisc."), std::string::npos) << text;
  p.simulated_reason.clear();
  EXPECT_EQ(network_link_text(p).find("Not the real link"), std::string::npos);
}

}  // namespace
}  // namespace dpv::course
