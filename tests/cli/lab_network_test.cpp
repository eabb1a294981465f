// `dpv lab network` end to end: a tiny sweep (2 points, few steps) on a shaped link prints and
// writes measurement and prediction, positive; the simulated link is labelled so; without
// CAP_NET_ADMIN the lab says so and simulates; a failing job and a Ctrl-C leave no namespace
// behind; a dead lab's leftovers are removed. Tests that need root skip, saying why.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/lab_netns.h"
#include "cli/lab_process.h"
#include "launch_helpers.h"
#include "run_dpv.h"

namespace dpv::testing {
namespace {

#define DPV_LAB_SKIP_OR_FAIL(why)                                                  \
  do {                                                                             \
    if (std::getenv("DPV_REQUIRE_NETNS")) FAIL() << "DPV_REQUIRE_NETNS: " << (why); \
    GTEST_SKIP() << (why);                                                         \
  } while (0)

// No namespace of the lab with pid `pid` is left.
void expect_no_lab_namespaces(int pid) {
  const cli::LabNames n = cli::LabNames::for_pid(pid);
  EXPECT_FALSE(cli::network_namespace_exists(n.ns_a)) << n.ns_a;
  EXPECT_FALSE(cli::network_namespace_exists(n.ns_b)) << n.ns_b;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

void expect_points_positive(const nlohmann::json& doc, size_t count) {
  ASSERT_EQ(doc.at("points").size(), count) << doc.dump();
  for (const auto& p : doc.at("points")) {
    for (const char* key : {"step_ms", "predicted_step_ms", "ratio", "bytes_per_step", "rate_bits_per_s"})
      EXPECT_GT(p.at(key).get<double>(), 0) << key << " in " << p.dump();
    for (const char* key : {"exposed_ms", "predicted_exposed_ms"}) EXPECT_GE(p.at(key).get<double>(), 0) << key;
    EXPECT_GE(p.at("steps_measured").get<int>(), 1);
  }
}

class LabNetworkTest : public CliTest {};

// The pid of a child that has exited and been reaped: a pid no process has now.
pid_t dead_pid() {
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  return dead;
}

TEST_F(LabNetworkTest, SimulatedSweepIsLabelledAndPredicted) {
  // A dead lab's temporary folder, which this lab removes.
  const std::filesystem::path stale =
      std::filesystem::temp_directory_path() / ("dpv-lab-" + std::to_string(dead_pid()) + "-test00");
  std::filesystem::create_directories(stale);
  const std::string json = path("lab.json");
  const RunResult r = run_dpv({"lab", "network", "--simulated", "--rate", "100mbit,10mbit", "--delay", "2ms", "--json",
                               json, "--", "train", "--ddp", "--steps", "4"});
  const bool stale_left = std::filesystem::exists(stale);
  std::filesystem::remove_all(stale);
  EXPECT_FALSE(stale_left) << "a dead lab's temporary folder stays: " << stale;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("link: SIMULATED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("simulated: --simulated was given"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pred_ms"), std::string::npos) << r.out;
  const nlohmann::json doc = read_json(json);
  EXPECT_TRUE(doc.at("simulated").get<bool>());
  expect_points_positive(doc, 2);
  EXPECT_TRUE(doc["points"][0]["grad_error"].is_null()) << "no hook, nothing probed";
  // 2 ms each way, at least 2 messages per all-reduce: the slower link predicts more exposed time.
  EXPECT_GT(doc["points"][1]["predicted_exposed_ms"].get<double>(), doc["points"][0]["predicted_exposed_ms"].get<double>());
  EXPECT_GE(doc["points"][0]["predicted_exposed_ms"].get<double>(), 4.0);
}

// The hooks' bytes per step: fp16 half of the all-reduce's, PowerSGD (from iteration 2) far fewer.
TEST_F(LabNetworkTest, SimulatedHookSweepReportsEachHooksBytes) {
  const std::string json = path("lab.json");
  const RunResult r = run_dpv({"lab", "network", "--simulated", "--rate", "100mbit", "--comm-hook",
                               "allreduce,fp16,powersgd", "--json", json, "--", "train", "--ddp", "--preset",
                               "mnist-mlp", "--steps", "5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = read_json(json);
  expect_points_positive(doc, 3);
  ASSERT_EQ(doc["points"].size(), 3u);
  EXPECT_EQ(doc["points"][0]["comm_hook"], "allreduce");
  EXPECT_EQ(doc["points"][2]["comm_hook"], "powersgd");
  const double allreduce = doc["points"][0]["bytes_per_step"].get<double>();
  EXPECT_EQ(doc["points"][1]["bytes_per_step"].get<double>() * 2, allreduce);
  EXPECT_LT(doc["points"][2]["bytes_per_step"].get<double>() * 10, allreduce);
  // Beside the bytes saved, the gradient error each hook cost on its extra probed step (not timed):
  // allreduce_hook is the exact average, fp16 float16 rounding, PowerSGD far more.
  EXPECT_EQ(doc["points"][0]["saved_bytes_per_step"].get<double>(), 0.0);
  EXPECT_EQ(doc["points"][1]["saved_bytes_per_step"].get<double>() * 2, allreduce);
  EXPECT_EQ(doc["points"][0]["grad_error"].get<double>(), 0.0);
  const double fp16 = doc["points"][1]["grad_error"].get<double>();
  EXPECT_GT(fp16, 1e-6);
  EXPECT_LT(fp16, 2e-3);
  EXPECT_GT(doc["points"][2]["grad_error"].get<double>(), 10 * fp16);
  for (const auto& p : doc["points"]) EXPECT_EQ(p["steps_measured"].get<int>(), 3) << "5 steps, 2 warm-up, no probe";
  EXPECT_NE(r.out.find("grad_error"), std::string::npos) << r.out;
  expect_error(run_dpv({"lab", "network", "--simulated", "--rate", "10mbit", "--comm-hook", "bf16", "--", "train",
                        "--ddp"}),
               {"--comm-hook 'bf16' is not a hook the lab sweeps"});
}

TEST_F(LabNetworkTest, RefusesATrainCommandItCannotMeasure) {
  expect_error(run_dpv({"lab", "network", "--simulated", "--rate", "10mbit", "--", "train", "--steps", "2"}),
               {"add --ddp"});
  expect_error(run_dpv({"lab", "network", "--simulated", "--rate", "10mbit", "--", "train", "--ddp", "--devices", "cpu:2"}),
               {"--devices after -- is the lab's to set"});
  expect_error(run_dpv({"lab", "network", "--simulated", "--rate", "10furlong", "--", "train", "--ddp"}),
               {"--rate '10furlong'"});
  expect_error(run_dpv({"lab", "network", "--simulated", "--rate", "10mbit", "--loss", "1", "--", "train", "--ddp"}),
               {"models no packet loss"});
}

TEST_F(LabNetworkTest, WithoutCapNetAdminItSaysSoAndSimulates) {
  if (getuid() != 0) {
    // Not root: the lab itself lacks the capability.
    const RunResult r = run_dpv({"lab", "network", "--rate", "10mbit", "--", "train", "--ddp", "--steps", "3"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("simulated: this process lacks CAP_NET_ADMIN"), std::string::npos) << r.out;
    return;
  }
  if (cli::run_with_timeout({"setpriv", "--version"}, std::chrono::seconds(10)).exit_code != 0)
    GTEST_SKIP() << "setpriv (util-linux) is not installed: cannot drop CAP_NET_ADMIN as root";
  Background lab({"lab", "network", "--rate", "10mbit", "--", "train", "--ddp", "--steps", "3"},
                 {"setpriv", "--bounding-set", "-net_admin", "--inh-caps", "-net_admin"});
  const RunResult r = lab.finish(std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("simulated: this process lacks CAP_NET_ADMIN"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("run it as root"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("link: SIMULATED"), std::string::npos) << r.out;
}

// Needs root and namespaces: skips elsewhere.
bool root_lab_possible(std::string& why) {
  if (const auto w = cli::why_no_shaping()) {
    why = "lab test skipped: " + *w;
    return false;
  }
  return true;
}

TEST_F(LabNetworkTest, TinySweepOnAShapedLinkRemovesADeadLabsLeftovers) {
  std::string why;
  if (!root_lab_possible(why)) DPV_LAB_SKIP_OR_FAIL(why);
  // A namespace named like a lab whose pid is gone.
  const pid_t dead = dead_pid();
  const std::string leftover = cli::LabNames::for_pid(dead).ns_a;
  if (cli::run_with_timeout({"ip", "netns", "add", leftover}, std::chrono::seconds(10)).exit_code != 0)
    DPV_LAB_SKIP_OR_FAIL("lab test skipped: `ip netns add` failed");
  const std::string json = path("lab.json");
  Background lab({"lab", "network", "--rate", "100mbit,20mbit", "--timeout", "60", "--json", json, "--", "train",
                  "--ddp", "--steps", "4"});
  const RunResult r = lab.finish(std::chrono::seconds(180));
  // Gone: removed by this lab ("removed <name>"), or by another lab that ctest runs beside it and
  // that started first: every lab clears dead labs' leftovers when it starts.
  const bool leftover_stays = cli::network_namespace_exists(leftover);
  cli::run_with_timeout({"ip", "netns", "del", leftover}, std::chrono::seconds(10));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(leftover_stays) << "a dead lab's namespace " << leftover << " is still there:\n" << r.out;
  EXPECT_NE(r.out.find("link: veth pair"), std::string::npos) << r.out;
  const nlohmann::json doc = read_json(json);
  EXPECT_FALSE(doc.at("simulated").get<bool>());
  expect_points_positive(doc, 2);
  expect_no_lab_namespaces(lab.pid());
}

TEST_F(LabNetworkTest, FailingJobLeavesNoNamespace) {
  std::string why;
  if (!root_lab_possible(why)) DPV_LAB_SKIP_OR_FAIL(why);
  Background lab({"lab", "network", "--rate", "50mbit", "--timeout", "30", "--", "train", "--ddp", "--preset", "nosuch"});
  const RunResult r = lab.finish(std::chrono::seconds(120));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("the DDP job failed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nosuch"), std::string::npos) << "the node's own error is quoted: " << r.err;
  expect_no_lab_namespaces(lab.pid());
}

TEST_F(LabNetworkTest, CtrlCStopsTheJobAndLeavesNoNamespace) {
  std::string why;
  if (!root_lab_possible(why)) DPV_LAB_SKIP_OR_FAIL(why);
  Background lab({"lab", "network", "--rate", "50mbit", "--timeout", "120", "--", "train", "--ddp", "--steps",
                  "10000000"});
  // The two nodes are the lab's two children once the job runs.
  ASSERT_TRUE(lab.wait_for_output("step_ms", std::chrono::seconds(60)));
  ASSERT_EQ(lab.wait_for_children(2, std::chrono::seconds(60)).size(), 2u);
  const cli::LabNames n = cli::LabNames::for_pid(lab.pid());
  EXPECT_TRUE(cli::network_namespace_exists(n.ns_a)) << n.ns_a;
  ::kill(lab.pid(), SIGINT);
  const RunResult r = lab.finish(std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("stopped by SIGINT"), std::string::npos) << r.err;
  expect_no_lab_namespaces(lab.pid());
}

}  // namespace
}  // namespace dpv::testing
