// Restarts that resume (issue 27): a `dpv launch --max-restarts 1` job of `dpv train --ddp
// --checkpoint DIR` whose rank 1 is killed mid-run starts both workers again, they resume from the
// newest checkpoint, and the job ends with exactly the checkpoint of a job never interrupted. Also:
// Adam's state (its per-parameter step count and both moments) survives a resume bit for bit.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/checkpoint_files.h"
#include "tests/cli/launch_helpers.h"
#include "tests/cli/run_dpv.h"
#include "tests/support/wait.h"

namespace dpv::testing {
namespace {

using std::chrono::seconds;

class RestartCheckpoint : public CliTest {
  const PinnedGemm pinned_{"openblas"};  // every run below multiplies alike (checkpoint_files.h)

 protected:
  // The pid of rank `rank`'s first start, from the launcher's events file (-1 until it is there).
  int first_pid_of(const std::string& events, int rank) const {
    std::ifstream in(events);
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json e = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (e.is_object() && e.value("event", "") == "started" && e.value("rank", -1) == rank && e.value("attempt", -1) == 0)
        return e.value("pid", -1);
    }
    return -1;
  }
};

// Adam with BatchNorm buffers: the optimizer's step count, both moments and the buffers decide the numbers.
std::vector<std::string> train(const std::string& dir, int64_t steps) {
  return {"train", "--preset", "mlp-bn", "--ddp", "--optimizer", "adam", "--lr", "0.01", "--seed", "3", "--steps",
          std::to_string(steps), "--checkpoint", dir, "--checkpoint-every", "5"};
}

std::vector<std::string> launch(const std::vector<std::string>& launcher_flags, const std::vector<std::string>& command) {
  std::vector<std::string> args{"launch", "--nproc-per-node", "2", "--master-port", std::to_string(free_port()),
                                "--timeout", "60"};
  args.insert(args.end(), launcher_flags.begin(), launcher_flags.end());
  args.push_back("--");
  args.insert(args.end(), command.begin(), command.end());
  return args;
}

}  // namespace

TEST_F(RestartCheckpoint, AKilledRankRestartsTheJobWhichResumesBitIdentical) {
  constexpr int64_t kSteps = 1500;  // seconds of training: the kill comes long before the end
  const std::string whole = path("whole"), killed = path("killed"), events = path("events.jsonl");
  const RunResult uninterrupted = run_dpv(launch({}, train(whole, kSteps)));
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.err;

  Background job(launch({"--max-restarts", "1", "--events-file", events}, train(killed, kSteps)));
  ASSERT_TRUE(wait_until([&] { return has_checkpoint(killed); }, seconds(60))) << job.finish(seconds(30)).err;
  const int rank1 = first_pid_of(events, 1);
  ASSERT_GT(rank1, 0);
  ::kill(rank1, SIGKILL);
  const RunResult r = job.finish(seconds(180));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("was killed by signal 9 (Killed); restarting all 2 workers (restart 1 of 1)"), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("resumed from " + killed + "/checkpoint-"), std::string::npos) << r.out;
  expect_same_checkpoint(checkpoint_file(whole, kSteps), checkpoint_file(killed, kSteps));
}

TEST_F(RestartCheckpoint, AdamsStateResumesBitIdenticalInProcess) {
  const std::string whole = path("whole"), split = path("split");
  for (const std::string devices : {"cpu:1", "cpu:2"}) {
    SCOPED_TRACE(devices);
    auto args = [&](const std::string& dir, int64_t steps) {
      std::vector<std::string> a = train(dir + devices, steps);
      a.erase(a.begin() + 3);  // DataParallel on `devices` (no --ddp)
      a.insert(a.end(), {"--devices", devices});
      return a;
    };
    ASSERT_EQ(run_dpv(args(whole, 12)).exit_code, 0);
    ASSERT_EQ(run_dpv(args(split, 7)).exit_code, 0);
    const RunResult rest = run_dpv(args(split, 12));
    ASSERT_EQ(rest.exit_code, 0) << rest.err;
    EXPECT_NE(rest.out.find("(step 7)"), std::string::npos) << rest.out;
    const SafetensorsFile file = read_checkpoint(checkpoint_file(split + devices, 12));
    EXPECT_TRUE(file.tensors.contains("optim/0.weight/exp_avg_sq"));
    EXPECT_EQ(file.tensors.at("optim/0.weight/step").to_doubles(), std::vector<double>{12.0});
    expect_same_checkpoint(checkpoint_file(whole + devices, 12), checkpoint_file(split + devices, 12));
  }
}

TEST_F(RestartCheckpoint, AnotherOptimizersCheckpointIsRefused) {
  const std::string dir = path("c");
  ASSERT_EQ(run_dpv(train(dir, 5)).exit_code, 0);
  std::vector<std::string> sgd = train(dir, 10);
  sgd.erase(sgd.begin() + 4, sgd.begin() + 8);  // no --optimizer adam --lr 0.01
  const RunResult r = run_dpv(sgd);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--optimizer"), std::string::npos) << r.err;
}

}  // namespace dpv::testing
