// `dpv train --checkpoint DIR` (issue 27): a run killed with SIGKILL after a checkpoint and started
// again ends with exactly the tensors of the run that was never interrupted (model, buffers and SGD
// momentum, bit for bit), for DataParallel and in-process DDP; an incomplete newest checkpoint is
// skipped with a warning, a checkpoint of another run is refused, and no temporary file stays.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/io/input_file.h"
#include "engine/io/safetensors.h"
#include "tests/cli/checkpoint_files.h"
#include "tests/cli/launch_helpers.h"
#include "tests/cli/run_dpv.h"
#include "tests/support/wait.h"

namespace dpv::testing {
namespace {

namespace fs = std::filesystem;

class TrainCheckpoint : public CliTest {
  const PinnedGemm pinned_{"openblas"};  // every run below multiplies alike (checkpoint_files.h)
};

// mlp-bn (BatchNorm buffers) with momentum, so the optimizer state decides the numbers too.
std::vector<std::string> train_args(const std::string& dir, bool ddp, int64_t steps, const std::string& seed = "0") {
  std::vector<std::string> args{"train", "--preset", "mlp-bn", "--devices", "cpu:2", "--momentum", "0.9",
                                "--seed", seed, "--steps", std::to_string(steps), "--checkpoint", dir,
                                "--checkpoint-every", "5"};
  if (ddp) args.push_back("--ddp");
  return args;
}

// The uninterrupted run into A; the same run into B killed after its first checkpoint and started
// again: the final checkpoints hold the same bytes.
void kill_and_resume(TrainCheckpoint& t, const std::string& a, const std::string& b, bool ddp) {
  constexpr int64_t kSteps = 1000;  // about 2 s: the kill comes long before the end
  const RunResult whole = run_dpv(train_args(a, ddp, kSteps));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  {
    Background killed(train_args(b, ddp, kSteps));
    // Any checkpoint: the one of step 5 is deleted again once those of steps 10 and 15 are in place.
    ASSERT_TRUE(wait_until([&] { return has_checkpoint(b); }, std::chrono::seconds(60)));
    ::kill(killed.pid(), SIGKILL);
    const RunResult r = killed.finish(std::chrono::seconds(20));
    ASSERT_EQ(r.exit_code, -1) << "the run ended before it was killed: " << r.out;
  }
  ASSERT_FALSE(fs::exists(checkpoint_file(b, kSteps)));
  const RunResult resumed = run_dpv(train_args(b, ddp, kSteps));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resumed from " + b + "/checkpoint-"), std::string::npos) << resumed.out;
  expect_same_checkpoint(checkpoint_file(a, kSteps), checkpoint_file(b, kSteps));
  // The newest two are kept, and nothing else: no temporary file of the killed writer either.
  const std::vector<std::string> kept{"checkpoint-000995.safetensors", "checkpoint-001000.safetensors"};
  EXPECT_EQ(names_in(b), kept);
  EXPECT_EQ(names_in(a), kept);
  (void)t;
}

TEST_F(TrainCheckpoint, AKilledDataParallelRunResumesBitIdentical) {
  kill_and_resume(*this, path("a"), path("b"), false);
}

TEST_F(TrainCheckpoint, AKilledInProcessDdpRunResumesBitIdentical) {
  kill_and_resume(*this, path("a"), path("b"), true);
}

// With 3 ranks the ring sums some elements in another order when the buckets differ: a resumed DDP
// must all-reduce in the buckets the uninterrupted run rebuilt after its first iteration, also when
// the checkpoint is of that first iteration (the rebuild not yet done).
TEST_F(TrainCheckpoint, AResumedThreeRankDdpRunKeepsTheRebuiltBuckets) {
  for (int64_t first : {1, 5}) {
    SCOPED_TRACE(first);
    const std::string a = path("a" + std::to_string(first)), b = path("b" + std::to_string(first));
    std::vector<std::string> whole = train_args(a, true, 10), part = train_args(b, true, first),
                             rest = train_args(b, true, 10);
    for (auto* args : {&whole, &part, &rest}) (*args)[4] = "cpu:3";
    ASSERT_EQ(run_dpv(whole).exit_code, 0);
    ASSERT_EQ(run_dpv(part).exit_code, 0);
    const RunResult r = run_dpv(rest);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("(step " + std::to_string(first) + ")"), std::string::npos) << r.out;
    expect_same_checkpoint(checkpoint_file(a, 10), checkpoint_file(b, 10));
  }
}

// `dpv launch` of 3 processes, each a rank of train_args' DDP run (no --devices: each rank its own).
std::vector<std::string> launched(const std::string& dir, int64_t steps) {
  std::vector<std::string> args{"launch", "--nproc-per-node", "3", "--master-port", std::to_string(free_port()),
                                "--timeout", "60", "--"};
  const std::vector<std::string> train = train_args(dir, true, steps);
  args.insert(args.end(), train.begin(), train.end());
  args.erase(args.begin() + 8 + 3, args.begin() + 8 + 5);
  return args;
}

// Under `dpv launch`: rank 0 writes, and every rank resumes from the checkpoint rank 0 found.
TEST_F(TrainCheckpoint, ALaunchedDdpRunResumesBitIdentical) {
  const RunResult whole = run_dpv(launched(path("a"), 10));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  ASSERT_EQ(run_dpv(launched(path("b"), 5)).exit_code, 0);
  const RunResult rest = run_dpv(launched(path("b"), 10));
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_NE(rest.out.find("resumed from " + checkpoint_file(path("b"), 5) + " (step 5)"), std::string::npos)
      << rest.out;
  expect_same_checkpoint(checkpoint_file(path("a"), 10), checkpoint_file(path("b"), 10));
  EXPECT_EQ(read_checkpoint(checkpoint_file(path("b"), 10)).metadata.at("world_size"), "3");
}

// Rank 0 cannot use the folder: every rank stops with rank 0's error, not a broken collective.
TEST_F(TrainCheckpoint, ALaunchedRunWhoseFolderIsAFileStopsWithRankZerosError) {
  const std::string file = write_text("plain", "not a folder");
  const RunResult r = run_dpv(launched(file, 5));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("dpv: error: NotADirectoryError: --checkpoint " + file + ": cannot be used as a folder"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("all_gather"), std::string::npos) << r.err;
}

TEST_F(TrainCheckpoint, CheckpointsHoldTheStateDictMomentumAndTheRunsFacts) {
  const RunResult r = run_dpv(train_args(path("c"), false, 7));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(names_in(path("c")), (std::vector<std::string>{"checkpoint-000005.safetensors", "checkpoint-000007.safetensors"}));
  const SafetensorsFile f = read_checkpoint(checkpoint_file(path("c"), 7));
  EXPECT_TRUE(f.tensors.contains("0.weight"));
  EXPECT_TRUE(f.tensors.contains("1.running_mean"));
  EXPECT_TRUE(f.tensors.contains("optim/0.weight/momentum_buffer"));
  EXPECT_EQ(f.metadata.at("step"), "7");
  EXPECT_EQ(f.metadata.at("strategy"), "DataParallel");
  EXPECT_EQ(f.metadata.at("world_size"), "2");
  EXPECT_EQ(f.metadata.at("seed"), "0");
  // A run already at --steps finishes at once, and says so.
  const RunResult again = run_dpv(train_args(path("c"), false, 7));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("resumed from " + checkpoint_file(path("c"), 7) + " (step 7): already at --steps 7"),
            std::string::npos)
      << again.out;
}

TEST_F(TrainCheckpoint, AnIncompleteNewestCheckpointIsSkippedAndLeftoversCleaned) {
  const std::string c = path("c"), whole = path("whole");
  ASSERT_EQ(run_dpv(train_args(whole, false, 15)).exit_code, 0);
  ASSERT_EQ(run_dpv(train_args(c, false, 10)).exit_code, 0);
  // The newest cut short as by a full disk; a temporary file of a writer that is gone.
  fs::resize_file(checkpoint_file(c, 10), fs::file_size(checkpoint_file(c, 10)) / 2);
  write_text("c/.dpv-tmp-999999999-0123456789ab", "partial");
  const RunResult r = run_dpv(train_args(c, false, 15));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  EXPECT_NE(r.err.find("dpv: warning: skipping incomplete checkpoint " + checkpoint_file(c, 10)), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("resumed from " + checkpoint_file(c, 5) + " (step 5)"), std::string::npos) << r.out;
  expect_same_checkpoint(checkpoint_file(whole, 15), checkpoint_file(c, 15));
  EXPECT_EQ(names_in(c), (std::vector<std::string>{"checkpoint-000010.safetensors", "checkpoint-000015.safetensors"}));
}

TEST_F(TrainCheckpoint, ACheckpointOfAnotherRunIsRefused) {
  const std::string c = path("c");
  ASSERT_EQ(run_dpv(train_args(c, false, 5)).exit_code, 0);
  expect_error(run_dpv(train_args(c, false, 10, "1")),
               {checkpoint_file(c, 5) + " is from another run: its seed is 0, this run's is 1", "--seed",
                "another --checkpoint DIR"});
  expect_error(run_dpv(train_args(c, true, 10)),
               {"its strategy is DataParallel, this run's is DistributedDataParallel", "--ddp"});
  std::vector<std::string> three = train_args(c, false, 10);
  three[4] = "cpu:3";
  expect_error(run_dpv(three), {"its world_size is 2, this run's is 3"});
  // Nothing was written by the refused runs.
  EXPECT_EQ(names_in(c), (std::vector<std::string>{"checkpoint-000005.safetensors"}));
}

}  // namespace
}  // namespace dpv::testing
