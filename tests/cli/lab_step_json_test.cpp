// `dpv train --ddp --step-json FILE` (the measurement `dpv lab network` reads) and the simulated
// link (--simulated-rate, --simulated-delay): the log's fields for in-process, simulated and
// launched ranks, and the flags' errors.
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/netmodel/link_model.h"
#include "run_dpv.h"

namespace dpv::testing {
namespace {

class StepJsonTest : public CliTest {
 protected:
  nlohmann::json read(const std::string& file) const {
    std::ifstream in(file);
    std::stringstream s;
    s << in.rdbuf();
    return nlohmann::json::parse(s.str());
  }
  // Every step measured, with positive times and the buckets' bytes adding up.
  static void expect_steps(const nlohmann::json& log, size_t count, int world) {
    EXPECT_EQ(log.at("format"), "dpv-ddp-steps");
    EXPECT_EQ(log.at("world").get<int>(), world);
    ASSERT_EQ(log.at("steps").size(), count) << log.dump();
    for (const auto& step : log.at("steps")) {
      EXPECT_GT(step.at("step_s").get<double>(), 0);
      EXPECT_GE(step.at("exposed_s").get<double>(), 0);
      EXPECT_GT(step.at("bytes").get<double>(), 0);
      EXPECT_FALSE(step.at("backward_s").empty());
      double bucket_bytes = 0;
      for (const auto& b : step.at("buckets")) bucket_bytes += b.at("bytes").get<double>();
      EXPECT_EQ(bucket_bytes, step.at("bytes").get<double>());
      EXPECT_LE(step.at("backward_end_s").get<double>(), step.at("step_s").get<double>());
    }
  }
};

TEST_F(StepJsonTest, InProcessRanksWriteEveryStep) {
  const std::string log = path("steps.json");
  const RunResult r = run_dpv({"train", "--ddp", "--devices", "cpu:2", "--steps", "3", "--step-json", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = read(log);
  expect_steps(j, 3, 2);
  EXPECT_TRUE(j.at("simulated_link").is_null());
}

TEST_F(StepJsonTest, SimulatedLinkIsLabelledAndExposesAtLeastTheModelledTime) {
  const std::string log = path("steps.json");
  const RunResult r = run_dpv({"train", "--ddp", "--devices", "cpu:2", "--steps", "3", "--simulated-rate", "10mbit",
                               "--simulated-delay", "2ms", "--step-json", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("over a SIMULATED link (10mbit, 2ms"), std::string::npos) << r.out;
  const nlohmann::json j = read(log);
  expect_steps(j, 3, 2);
  EXPECT_EQ(j.at("simulated_link").at("rate_bits_per_s").get<double>(), 10e6);
  EXPECT_EQ(j.at("simulated_link").at("delay_s").get<double>(), 0.002);
  const netmodel::Link link{0.002, 10e6 / 8};
  for (const auto& step : j.at("steps")) {
    // The last bucket is complete only when the backward ends: its whole all-reduce is exposed.
    const auto& last = step.at("buckets").back();
    const double modelled = netmodel::collective_seconds(netmodel::CollectiveKind::AllReduce, 2,
                                                         last.at("bytes").get<size_t>(), link);
    EXPECT_GE(last.at("end_s").get<double>() - last.at("start_s").get<double>(), modelled);
    EXPECT_GE(step.at("exposed_s").get<double>(), 0.004) << "2 messages of 2 ms each";
  }
}

TEST_F(StepJsonTest, LaunchedRankZeroWritesTheLog) {
  const std::string log = path("steps.json");
  const RunResult r = run_dpv({"launch", "--nproc-per-node", "2", "--master-port", "0", "--timeout", "60", "--",
                               "train", "--ddp", "--steps", "3", "--step-json", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = read(log);
  expect_steps(j, 3, 2);
  EXPECT_EQ(j.at("transport"), "gloo");
}

// A launched job with fp16_compress_hook: every bucket sends half its bytes; the probed extra step
// (Gloo ranks in their own processes, as on the lab's shaped link) records the error.
TEST_F(StepJsonTest, LaunchedHookSendsWhatItReports) {
  const std::string log = path("steps.json");
  const RunResult r = run_dpv({"launch", "--nproc-per-node", "2", "--master-port", "0", "--timeout", "60", "--",
                               "train", "--ddp", "--steps", "3", "--comm-hook", "fp16", "--probe-hook-error",
                               "--step-json", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = read(log);
  expect_steps(j, 4, 2);
  for (const auto& step : j.at("steps"))
    EXPECT_EQ(step.at("sent_bytes").get<double>() * 2, step.at("bytes").get<double>()) << step.dump();
  EXPECT_GT(j.at("steps")[3].at("hook_error").at("error_sq").get<double>(), 0);
  EXPECT_FALSE(j.at("steps")[2].contains("hook_error"));
}

// --probe-hook-error: one step more, the only one with the hook's error (fp16: float16 rounding's size).
TEST_F(StepJsonTest, ProbedHookStepIsTheExtraLastOne) {
  const std::string log = path("steps.json");
  const RunResult r = run_dpv({"train", "--ddp", "--devices", "cpu:2", "--steps", "3", "--simulated-rate", "1gbit",
                               "--comm-hook", "fp16", "--probe-hook-error", "--step-json", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = read(log);
  expect_steps(j, 4, 2);
  for (size_t i = 0; i < 3; ++i) EXPECT_FALSE(j.at("steps")[i].contains("hook_error")) << i;
  const auto& e = j.at("steps")[3].at("hook_error");
  const double relative = std::sqrt(e.at("error_sq").get<double>() / e.at("exact_sq").get<double>());
  EXPECT_GT(relative, 1e-6);
  EXPECT_LT(relative, 2e-3);
  EXPECT_GT(e.at("max_abs").get<double>(), 0);
  expect_error(run_dpv({"train", "--ddp", "--devices", "cpu:2", "--steps", "2", "--simulated-rate", "1gbit",
                        "--probe-hook-error", "--step-json", path("p.json")}),
               {"--probe-hook-error measures a communication hook's gradient error", "--comm-hook"}, path("p.json"));
  const RunResult no_log = run_dpv({"train", "--ddp", "--steps", "2", "--probe-hook-error"});
  EXPECT_EQ(no_log.exit_code, 2) << no_log.err;
  EXPECT_NE(no_log.err.find("--probe-hook-error requires --step-json"), std::string::npos) << no_log.err;
}

TEST_F(StepJsonTest, FlagErrors) {
  RunResult r = run_dpv({"train", "--steps", "2", "--step-json", path("s.json")});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--step-json requires --ddp"), std::string::npos) << r.err;
  r = run_dpv({"train", "--ddp", "--devices", "cpu:2", "--simulated-rate", "fast"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--simulated-rate 'fast'"), std::string::npos) << r.err;
  r = run_dpv({"train", "--ddp", "--devices", "cpu:2", "--simulated-delay", "1ms"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--simulated-delay"), std::string::npos) << r.err;
  r = run_dpv({"train", "--steps", "2", "--comm-hook", "fp16"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--comm-hook requires --ddp"), std::string::npos) << r.err;
  expect_error(run_dpv({"train", "--ddp", "--devices", "cpu:2", "--steps", "2", "--comm-hook", "fp16"}),
               {"--comm-hook with train --ddp runs on launched ranks"});
  expect_error(run_dpv({"train", "--ddp", "--devices", "cpu:2", "--simulated-rate", "10mbit", "--trace", path("t.json")}),
               {"--trace cannot be combined with a simulated link"}, path("t.json"));
  expect_error(run_dpv({"train", "--ddp", "--devices", "cpu:2", "--steps", "2", "--step-json", path("no/such/dir/s.json")}),
               {"s.json"});
}

}  // namespace
}  // namespace dpv::testing
