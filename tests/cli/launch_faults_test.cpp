// `dpv launch` under faults (issue 27): a launcher killed or hung up on takes its workers with it
// and frees the port; --max-restarts starts all workers again after one was killed; the events
// file records it all; a stopped rank is the one blamed; an empty --master-addr is a flag error;
// a derived per-rank output that would replace an input is refused before anything is written.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launch_helpers.h"
#include "run_dpv.h"
#include "tests/support/wait.h"

namespace dpv::testing {
namespace {

using std::chrono::seconds;
using nlohmann::json;

class LaunchFaults : public CliTest {
 protected:
  // The events written so far, one object per complete line.
  std::vector<json> events() const {
    std::ifstream in(path("events.jsonl"));
    std::vector<json> out;
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }
  size_t count(const std::string& event) const {
    size_t n = 0;
    for (const json& e : events()) n += e["event"] == event;
    return n;
  }
  // Node 0 of a two-node job: its ranks wait in the store for node 1's, which the test starts when
  // it wants the job to go on, so the job is running for as long as the test needs.
  std::vector<std::string> node0(const std::string& port, std::vector<std::string> extra = {}) const {
    std::vector<std::string> args{"launch", "--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "0",
                                  "--master-port", port, "--timeout", "60", "--events-file", path("events.jsonl")};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--", "bench", "allreduce", "--max-bytes", "4096", "--iters", "2"});
    return args;
  }
  static RunResult node1(const std::string& port) {
    return run_dpv({"launch", "--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "1", "--master-port", port,
                    "--timeout", "60", "--", "bench", "allreduce", "--max-bytes", "4096", "--iters", "2"});
  }
  // The pid of the n-th "started" event (0 first).
  int count_started_pid(size_t n) const {
    for (const json& e : events())
      if (e["event"] == "started" && n-- == 0) return e["pid"];
    return -1;
  }
  static std::string read_environ(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static bool all_gone(const std::vector<int>& pids) {
    return wait_until([&] {
      for (int pid : pids)
        if (process_alive(pid)) return false;
      return true;
    }, seconds(10));
  }
};

// A second job on the same port runs: nothing of the first still holds it.
void expect_port_free(const std::string& port) {
  RunResult r = run_dpv({"launch", "--nproc-per-node", "2", "--master-port", port, "--timeout", "60", "--", "bench",
                         "allreduce", "--max-bytes", "4096", "--iters", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(LaunchFaults, SigkillOfTheLauncherTakesItsWorkersWithIt) {
  const std::string port = std::to_string(free_port());
  Background job(node0(port));
  std::vector<int> workers = job.wait_for_children(2, seconds(20));
  ASSERT_EQ(workers.size(), 2u) << job.finish(seconds(20)).err;
  ::kill(job.pid(), SIGKILL);
  job.finish(seconds(10));
  EXPECT_TRUE(all_gone(workers)) << "a worker outlived its launcher's SIGKILL";
  expect_port_free(port);
}

// A closed terminal: the launcher stops its workers with SIGTERM and says why.
TEST_F(LaunchFaults, SighupStopsTheJobAsSigterm) {
  const std::string port = std::to_string(free_port());
  Background job(node0(port));
  std::vector<int> workers = job.wait_for_children(2, seconds(20));
  ASSERT_EQ(workers.size(), 2u) << job.finish(seconds(20)).err;
  ::kill(job.pid(), SIGHUP);
  RunResult r = job.finish(seconds(30));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("stopped by SIGHUP (the terminal closed): sent SIGTERM to 2 worker(s)"), std::string::npos) << r.err;
  EXPECT_TRUE(all_gone(workers));
  const std::vector<json> e = events();
  ASSERT_FALSE(e.empty());
  EXPECT_EQ(e.back()["event"], "finished");
  EXPECT_EQ(e.back()["ok"], false);
  for (const json& x : e) {
    if (x["event"] == "exited") {
      EXPECT_EQ(x["stopped_by_launcher"], true) << x.dump();
    }
  }
  expect_port_free(port);
}

// torchrun's --max-restarts: rank 1 killed while the job waits for node 1; node 0 stops rank 0,
// starts both again (rank 0 hosting the store on the same port), and the job then completes.
TEST_F(LaunchFaults, MaxRestartsStartsAllWorkersAgainAfterOneWasKilled) {
  const std::string port = std::to_string(free_port());
  Background job(node0(port, {"--max-restarts", "2"}));
  std::vector<int> first = job.wait_for_children(2, seconds(20));
  ASSERT_EQ(first.size(), 2u) << job.finish(seconds(20)).err;
  ASSERT_TRUE(wait_until([&] { return count("started") == 2; }, seconds(20)));
  const int killed = events()[1]["pid"];  // rank 1, started second
  ::kill(killed, SIGKILL);
  ASSERT_TRUE(wait_until([&] { return count("started") == 4; }, seconds(30))) << job.finish(seconds(20)).err;
  // The restarted workers (waiting for node 1) know the attempt, as torchrun's do; their
  // environment is the worker's once the forked launcher has become the worker (exec).
  for (int i : {2, 3}) {
    const int pid = count_started_pid(i);
    EXPECT_TRUE(wait_until([&] { return read_environ(pid).find("TORCHELASTIC_RESTART_COUNT=1") != std::string::npos; },
                           seconds(10)));
    EXPECT_NE(read_environ(pid).find("TORCHELASTIC_MAX_RESTARTS=2"), std::string::npos);
  }
  RunResult other = node1(port);
  RunResult r = job.finish(seconds(60));
  EXPECT_EQ(other.exit_code, 0) << other.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("dpv launch: rank 1 (local rank 1, pid " + std::to_string(killed) +
                       ") was killed by signal 9 (Killed); restarting all 2 workers (restart 1 of 2)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("over gloo, 4 ranks"), std::string::npos) << r.out;

  const std::vector<json> e = events();
  ASSERT_EQ(e.size(), 10u);
  for (int i : {0, 1}) {
    EXPECT_EQ(e[i]["event"], "started");
    EXPECT_EQ(e[i]["attempt"], 0);
    EXPECT_EQ(e[i]["rank"], i);
    EXPECT_EQ(e[i]["local_rank"], i);
    EXPECT_EQ(e[i]["pid"], first[i]);
  }
  EXPECT_EQ(e[2], json::parse(R"({"event":"exited","attempt":0,"rank":1,"pid":)" + std::to_string(killed) +
                              R"(,"exit_code":null,"signal":9,"stopped_by_launcher":false})"));
  EXPECT_EQ(e[3]["event"], "exited");
  EXPECT_EQ(e[3]["rank"], 0);
  EXPECT_EQ(e[3]["stopped_by_launcher"], true);  // the launcher's SIGTERM ended the waiting rank 0
  EXPECT_EQ(e[4], json::parse(R"({"event":"restarting","attempt":1,"failed_rank":1,"max_restarts":2})"));
  for (int i : {5, 6}) {
    EXPECT_EQ(e[i]["event"], "started");
    EXPECT_EQ(e[i]["attempt"], 1);
    EXPECT_EQ(e[i]["rank"], i - 5);
  }
  for (int i : {7, 8}) {
    EXPECT_EQ(e[i]["event"], "exited");
    EXPECT_EQ(e[i]["attempt"], 1);
    EXPECT_EQ(e[i]["exit_code"], 0);
    EXPECT_TRUE(e[i]["signal"].is_null());
  }
  EXPECT_EQ(e[9]["event"], "finished");
  EXPECT_EQ(e[9]["ok"], true);
  EXPECT_EQ(e[9]["attempts"], 2);
  EXPECT_EQ(e[9]["failed_rank"], -1);
}

// Without --max-restarts (torchrun's default, 0) the same kill ends the job, naming the rank.
TEST_F(LaunchFaults, NoRestartsByDefault) {
  const std::string port = std::to_string(free_port());
  Background job(node0(port));
  std::vector<int> workers = job.wait_for_children(2, seconds(20));
  ASSERT_EQ(workers.size(), 2u) << job.finish(seconds(20)).err;
  ASSERT_TRUE(wait_until([&] { return count("started") == 2; }, seconds(20)));
  const int killed = events()[1]["pid"];
  ::kill(killed, SIGKILL);
  RunResult r = job.finish(seconds(30));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("rank 1 (local rank 1, pid " + std::to_string(killed) + ") was killed by signal 9"),
            std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("restarting"), std::string::npos) << r.err;
  const std::vector<json> e = events();
  ASSERT_FALSE(e.empty());
  EXPECT_EQ(count("restarting"), 0u);
  EXPECT_EQ(e.back()["event"], "finished");
  EXPECT_EQ(e.back()["ok"], false);
  EXPECT_EQ(e.back()["attempts"], 1);
  EXPECT_EQ(e.back()["failed_rank"], 1);
  EXPECT_NE(e.back()["message"].get<std::string>().find("rank 1"), std::string::npos);
  EXPECT_TRUE(all_gone(workers));
}

// A rank stopped (SIGSTOP) mid-job: rank 0 fails waiting for it, and the launcher names the
// stopped rank as the cause, not rank 0.
TEST_F(LaunchFaults, AStoppedRankIsBlamedNotTheOneWaitingForIt) {
  Background job({"launch", "--nproc-per-node", "2", "--master-port", std::to_string(free_port()), "--timeout", "2",
                  "--events-file", path("events.jsonl"), "--", "bench", "allreduce", "--min-bytes", "65536",
                  "--max-bytes", "65536", "--iters", "100000000", "--seconds-per-size", "1000"});
  ASSERT_TRUE(job.wait_for_output("all_reduce (sum, float32) over gloo, 2 ranks", seconds(20)))
      << job.finish(seconds(20)).err;
  const int stopped = count_started_pid(1);
  ::kill(stopped, SIGSTOP);
  RunResult r = job.finish(seconds(60));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("dpv: error: RuntimeError: rank 1 (local rank 1, pid " + std::to_string(stopped) +
                       ") was stopped by SIGSTOP and never arrived; rank 0 failed waiting for it (exited with status 1"),
            std::string::npos)
      << r.err;
  const std::vector<json> e = events();
  ASSERT_FALSE(e.empty());
  EXPECT_EQ(e.back()["failed_rank"], 1);
  EXPECT_TRUE(all_gone({stopped}));
}

TEST_F(LaunchFaults, AnEmptyMasterAddressIsAFlagError) {
  RunResult r = run_dpv({"launch", "--nproc-per-node", "1", "--master-addr", "", "--", "bench", "allreduce"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--master-addr: the address is empty"), std::string::npos) << r.err;
}

// torch.distributed's env:// needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT only.
TEST_F(LaunchFaults, WorkersWithOnlyPyTorchsFourVariablesRun) {
  const std::string port = std::to_string(free_port());
  std::vector<std::unique_ptr<Background>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::make_unique<Background>(
        std::vector<std::string>{"bench", "allreduce", "--max-bytes", "4096", "--iters", "2"},
        std::vector<std::string>{"env", "-u", "LOCAL_RANK", "-u", "LOCAL_WORLD_SIZE", "RANK=" + std::to_string(r),
                                 "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, "DPV_TIMEOUT=30"}));
  }
  RunResult r0 = ranks[0]->finish(seconds(60));
  RunResult r1 = ranks[1]->finish(seconds(60));
  EXPECT_EQ(r0.exit_code, 0) << r0.err;
  EXPECT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_NE(r0.out.find("over gloo, 2 ranks"), std::string::npos) << r0.out;
}

// R11: rank 0's per-rank trace of --trace job.json is job.rank0.json, the model file here. Refused
// before any rank writes, the model's bytes untouched.
TEST_F(LaunchFaults, ADerivedPerRankOutputThatIsAnInputIsRefused) {
  const std::string model = write_text("job.rank0.json", simple_model_json());
  RunResult r = run_dpv({"launch", "--nproc-per-node", "2", "--master-port", "0", "--timeout", "60", "--", "train",
                         "--ddp", "--model", model, "--trace", path("job.json"), "--steps", "2"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("rank 0's trace (from --trace '" + path("job.json") + "') '" + model +
                       "' is the same file as --model '" + model + "'; writing it would replace that input"),
            std::string::npos)
      << r.err;
  std::ifstream in(model);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), simple_model_json());
  EXPECT_FALSE(exists(path("job.json")));
  EXPECT_FALSE(exists(path("job.rank1.json")));
  // Another spelling of the same file (through ./ and ..) is the same file.
  const std::string spelled = dir_.string() + "/./../" + dir_.filename().string() + "/job.json";
  r = run_dpv({"launch", "--nproc-per-node", "2", "--master-port", "0", "--timeout", "60", "--", "train", "--ddp",
               "--model", model, "--trace", spelled, "--steps", "2"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is the same file as --model"), std::string::npos) << r.err;
}

// The events file is an output like any other: a folder, a FIFO (which would block the open) or
// the --error-file's path are refused before any worker starts.
TEST_F(LaunchFaults, AnEventsFileThatIsNoRegularFileIsRefused) {
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& target : {dir_.string(), fifo}) {
    RunResult r = run_dpv({"launch", "--nproc-per-node", "1", "--events-file", target, "--", "bench", "allreduce"});
    EXPECT_EQ(r.exit_code, 1) << target;
    EXPECT_NE(r.err.find("--events-file"), std::string::npos) << r.err;
  }
  RunResult r = run_dpv({"launch", "--nproc-per-node", "1", "--events-file", path("same.json"), "--error-file",
                         path("same.json"), "--", "bench", "allreduce"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--error-file '" + path("same.json") + "' is the same file as --events-file"), std::string::npos)
      << r.err;
  // Nor may either be a file the launched command names: it could be one of its inputs.
  const std::string model = write_text("model.json", simple_model_json());
  for (const std::string& given : {model, "--model=" + model}) {
    r = run_dpv({"launch", "--nproc-per-node", "1", "--events-file", model, "--", "train", "--ddp", given});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--events-file '" + model + "' is the same file as the launched command's file"),
              std::string::npos) << r.err;
    std::ifstream in(model);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(text.str(), simple_model_json());
  }
}

// A job refused before any worker starts still ends its events with why.
TEST_F(LaunchFaults, ARefusedJobsEventsEndWithTheReason) {
  ListeningPort busy;
  RunResult r = run_dpv({"launch", "--nproc-per-node", "2", "--master-port", std::to_string(busy.port()),
                         "--events-file", path("events.jsonl"), "--", "bench", "allreduce"});
  EXPECT_EQ(r.exit_code, 1);
  const std::vector<json> e = events();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0]["event"], "finished");
  EXPECT_EQ(e[0]["ok"], false);
  EXPECT_EQ(e[0]["attempts"], 0);
  EXPECT_EQ(e[0]["failed_rank"], -1);
  EXPECT_NE(e[0]["message"].get<std::string>().find("the port is in use"), std::string::npos) << e[0].dump();
}

}  // namespace
}  // namespace dpv::testing
