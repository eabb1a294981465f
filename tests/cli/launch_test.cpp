// `dpv launch`: real worker processes joined by the store and Gloo on 127.0.0.1. A finished job,
// a rank killed mid-run, SIGTERM to the launcher, a port in use, a bad or unreachable master and a
// world-size mismatch all end within their timeouts with an error naming what went wrong.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "launch_helpers.h"
#include "run_dpv.h"

namespace dpv::testing {
namespace {

using std::chrono::seconds;

TEST(Launch, TwoAndFourRanksRunTheAllReduceBenchmark) {
  for (int ranks : {2, 4}) {
    RunResult r = run_dpv({"launch", "--nproc-per-node", std::to_string(ranks), "--master-port",
                           std::to_string(free_port()), "--timeout", "60", "--", "bench", "allreduce", "--max-bytes",
                           "65536", "--iters", "3"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("over gloo, " + std::to_string(ranks) + " ranks"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("65536"), std::string::npos) << r.out;
  }
}

// Port 0 (the app's process runs use it): the launcher asks the system for a free port, and the
// workers meet there; several nodes cannot share a port nobody told them.
TEST(Launch, MasterPortZeroPicksAFreePort) {
  RunResult r = run_dpv({"launch", "--nproc-per-node", "2", "--master-port", "0", "--timeout", "60", "--", "bench",
                         "allreduce", "--max-bytes", "4096", "--iters", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("over gloo, 2 ranks"), std::string::npos) << r.out;
  r = run_dpv({"launch", "--nproc-per-node", "1", "--nnodes", "2", "--master-port", "0", "--", "bench", "allreduce"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--master-port 0 (pick a free port) works on one node only"), std::string::npos) << r.err;
}

// `dpv launch` started inside a torchrun job: its workers must not take the outer job's agent store
// for theirs (TORCHELASTIC_USE_AGENT_STORE=True is not passed on), so rank 0 hosts the store.
TEST(Launch, TorchrunsAgentStoreVariablesAreNotPassedOn) {
  Background launch({"launch", "--nproc-per-node", "2", "--master-port", "0", "--timeout", "20", "--", "bench",
                     "allreduce", "--max-bytes", "4096", "--iters", "2"},
                    {"env", "TORCHELASTIC_USE_AGENT_STORE=True", "TORCHELASTIC_RESTART_COUNT=0"});
  RunResult r = launch.finish(seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("over gloo, 2 ranks"), std::string::npos) << r.out;
}

TEST(Launch, AWorkerWithoutALauncherIsToldHowToStartIt) {
  RunResult r = run_dpv({"bench", "allreduce"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not started by a launcher"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("dpv launch --nproc-per-node K"), std::string::npos) << r.err;
}

TEST(Launch, ARankKilledMidRunEndsTheJobNamingIt) {
  Background job({"launch", "--nproc-per-node", "2", "--master-port", std::to_string(free_port()), "--timeout", "20",
                  "--", "bench", "allreduce", "--min-bytes", "1048576", "--max-bytes", "1048576", "--iters",
                  "100000000", "--seconds-per-size", "1000"});
  std::vector<int> workers = job.wait_for_children(2, seconds(20));
  ASSERT_EQ(workers.size(), 2u) << job.finish(seconds(20)).err;
  // Rank 0 prints the header once the group is formed, right before the first all-reduce.
  ASSERT_TRUE(job.wait_for_output("all_reduce (sum, float32) over gloo, 2 ranks", seconds(20)))
      << job.finish(seconds(20)).err;
  const auto start = std::chrono::steady_clock::now();
  ::kill(workers[1], SIGKILL);
  RunResult r = job.finish(seconds(30));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("dpv: error: RuntimeError: rank 1 (local rank 1, pid " + std::to_string(workers[1]) +
                       ") was killed by signal 9"),
            std::string::npos)
      << r.err;
  EXPECT_LT(took, 20.0) << "the launcher must not wait for the timeout when a rank dies";
  for (int pid : workers) EXPECT_FALSE(process_alive(pid)) << "worker " << pid << " outlived the launcher";
}

TEST(Launch, SigtermStopsEveryWorker) {
  Background job({"launch", "--nproc-per-node", "2", "--master-port", std::to_string(free_port()), "--timeout", "20",
                  "--", "bench", "allreduce", "--min-bytes", "65536", "--max-bytes", "65536", "--iters",
                  "100000000", "--seconds-per-size", "1000"});
  std::vector<int> workers = job.wait_for_children(2, seconds(20));
  ASSERT_EQ(workers.size(), 2u) << job.finish(seconds(20)).err;
  ASSERT_TRUE(job.wait_for_output("all_reduce (sum, float32) over gloo, 2 ranks", seconds(20)))
      << job.finish(seconds(20)).err;
  ::kill(job.pid(), SIGTERM);
  RunResult r = job.finish(seconds(30));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("stopped by SIGTERM"), std::string::npos) << r.err;
  for (int pid : workers) EXPECT_FALSE(process_alive(pid)) << "worker " << pid << " outlived the launcher";
}

TEST(Launch, PortInUseIsAClearError) {
  ListeningPort busy;
  RunResult r = run_dpv({"launch", "--nproc-per-node", "2", "--master-port", std::to_string(busy.port()), "--",
                         "bench", "allreduce"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot host the store on 127.0.0.1:" + std::to_string(busy.port()) + ": the port is in use"),
            std::string::npos)
      << r.err;
  // The engine names MASTER_PORT; the launcher adds the flag that set it.
  EXPECT_NE(r.err.find("pick another MASTER_PORT (dpv launch sets MASTER_PORT from --master-port)"), std::string::npos)
      << r.err;
}

TEST(Launch, BadMasterAddressIsAClearError) {
  RunResult r = run_dpv({"launch", "--nproc-per-node", "1", "--master-addr", "no-such-host.invalid", "--", "bench",
                         "allreduce"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot resolve the address 'no-such-host.invalid'"), std::string::npos) << r.err;
  // A master address that is not this machine's cannot host node 0's store.
  r = run_dpv({"launch", "--nproc-per-node", "1", "--master-addr", "192.0.2.1", "--", "bench", "allreduce"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("must be an address of the node with node rank 0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("dpv launch sets MASTER_ADDR from --master-addr"), std::string::npos) << r.err;
}

TEST(Launch, UnreachableMasterFailsWithinTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  RunResult r = run_dpv({"launch", "--nproc-per-node", "1", "--nnodes", "2", "--node-rank", "1", "--master-port",
                         std::to_string(free_port()), "--timeout", "2", "--", "bench", "allreduce"});
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("rank 1 (local rank 0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("could not connect to the store at 127.0.0.1:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("within 2 s"), std::string::npos) << r.err;
  EXPECT_LT(took, 15.0);
}

TEST(Launch, WorldSizeMismatchBetweenNodesIsAClearError) {
  const std::string port = std::to_string(free_port());
  // Node 0 may wait 60 s; it must not: the store refuses node 1's ranks and fails node 0's at once.
  const auto start = std::chrono::steady_clock::now();
  Background node0({"launch", "--nproc-per-node", "1", "--nnodes", "2", "--node-rank", "0", "--master-port", port,
                    "--timeout", "60", "--", "bench", "allreduce"});
  // Node 1 retries its connection until the timeout, so it may start before node 0 hosts the store.
  RunResult node1 = run_dpv({"launch", "--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "1", "--master-port",
                             port, "--timeout", "60", "--", "bench", "allreduce"});
  RunResult r0 = node0.finish(seconds(90));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(node1.exit_code, 1);
  EXPECT_NE(node1.err.find("world size mismatch: this rank was started with WORLD_SIZE=4 but rank 0 hosting the "
                           "store has WORLD_SIZE=2"),
            std::string::npos)
      << node1.err;
  // The worker's engine error names WORLD_SIZE; the launcher that reports it adds its flags.
  EXPECT_NE(node1.err.find("(dpv launch sets WORLD_SIZE from --nnodes x --nproc-per-node)"), std::string::npos)
      << node1.err;
  EXPECT_EQ(r0.exit_code, 1) << r0.err;
  EXPECT_NE(r0.err.find("the job cannot form: a rank joined with WORLD_SIZE=4 but rank 0 hosting the store has "
                        "WORLD_SIZE=2"),
            std::string::npos)
      << r0.err;
  EXPECT_LT(took, 45.0) << "node 0 waited out its timeout instead of failing with node 1";
}

TEST(Launch, CommandLineMistakes) {
  RunResult r = run_dpv({"launch", "--nproc-per-node", "2"});
  EXPECT_EQ(r.exit_code, 2);
  r = run_dpv({"launch", "--nproc-per-node", "1", "--nnodes", "2", "--node-rank", "2", "--", "devices"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--node-rank 2 is out of range for --nnodes 2"), std::string::npos) << r.err;
  r = run_dpv({"launch", "--nproc-per-node", "1", "--backend", "mpi", "--", "devices"});
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace dpv::testing

namespace dpv::testing {
namespace {

class TraceMergeCli : public CliTest {};

TEST_F(TraceMergeCli, MergesRankTracesIntoOneFile) {
  const std::string r0 = write_text("r0.json", R"({"traceEvents":[{"name":"forward","ph":"X","pid":1,"tid":1,"ts":0,"dur":2}]})");
  const std::string r1 = write_text("r1.json", R"({"traceEvents":[{"name":"backward","ph":"X","pid":1,"tid":1,"ts":1,"dur":2}]})");
  RunResult r = run_dpv({"trace", "merge", path("merged.json"), r0, r1});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(path("merged.json"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"rank 1\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"backward\""), std::string::npos) << text;

  const std::string bad = write_text("bad.json", "[1, 2");
  r = run_dpv({"trace", "merge", path("out.json"), r0, bad});
  expect_error(r, {"bad.json is not a Chrome trace"}, path("out.json"));
}

}  // namespace
}  // namespace dpv::testing

namespace dpv::testing {
namespace {

// Workers started without `dpv launch`, as mpirun and srun start them: each reads its launcher's
// own rank variables (plus MASTER_ADDR / MASTER_PORT) and the job runs the same.
TEST(LaunchOtherLaunchers, MpirunAndSlurmVariables) {
  struct Style {
    const char *rank, *size, *local_rank, *local_size;
  };
  for (Style s : {Style{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                        "OMPI_COMM_WORLD_LOCAL_SIZE"},
                  Style{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"}}) {
    const std::string port = std::to_string(free_port());
    std::vector<std::unique_ptr<Background>> ranks;
    for (int r = 0; r < 2; ++r) {
      ranks.push_back(std::make_unique<Background>(
          std::vector<std::string>{"bench", "allreduce", "--max-bytes", "16384", "--iters", "2"},
          std::vector<std::string>{"env", "-u", "RANK", "-u", "WORLD_SIZE", "-u", "LOCAL_RANK", "-u",
                                   "LOCAL_WORLD_SIZE", std::string(s.rank) + "=" + std::to_string(r),
                                   std::string(s.size) + "=2", std::string(s.local_rank) + "=" + std::to_string(r),
                                   std::string(s.local_size) + "=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port,
                                   "DPV_TIMEOUT=30"}));
    }
    RunResult r0 = ranks[0]->finish(seconds(60));
    RunResult r1 = ranks[1]->finish(seconds(60));
    EXPECT_EQ(r0.exit_code, 0) << s.rank << ": " << r0.err;
    EXPECT_EQ(r1.exit_code, 0) << s.rank << ": " << r1.err;
    EXPECT_NE(r0.out.find("over gloo, 2 ranks"), std::string::npos) << r0.out;
    EXPECT_EQ(r1.out, "");
  }
}

}  // namespace
}  // namespace dpv::testing

namespace dpv::testing {

TEST(Launch, ErrorFileHoldsTheFailingRanksErrorAsValues) {
  const std::string path = ::testing::TempDir() + "launch_error_file_test.json";
  std::remove(path.c_str());
  RunResult r = run_dpv({"launch", "--nproc-per-node", "2", "--master-port", "0", "--error-file", path, "--", "train",
                         "--ddp", "--no-such-option"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "no error file at " << path << "; stderr: " << r.err;
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  EXPECT_NE(json.find("\"error_class\": \"RuntimeError\""), std::string::npos) << json;
  const bool rank0 = json.find("\"rank\": 0") != std::string::npos, rank1 = json.find("\"rank\": 1") != std::string::npos;
  EXPECT_TRUE(rank0 != rank1) << "one failing rank: " << json;
  EXPECT_NE(json.find("--no-such-option"), std::string::npos) << json;
  std::remove(path.c_str());
  // An error file in a missing folder is refused before any worker starts.
  r = run_dpv({"launch", "--nproc-per-node", "1", "--error-file", "/no-such-folder-for-dpv/error.json", "--", "bench",
               "allreduce"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--error-file"), std::string::npos) << r.err;
}

}  // namespace dpv::testing
