// The CPU backend's GEMM library per product shape as part of a training run (issue 29): a
// checkpoint records the choices, a resumed run multiplies with the checkpoint's choices rather than
// its own timing, a checkpoint without them (an older one) still resumes, a launched 2-rank job
// (rank 0's choices through the store) runs and records them, and DPV_GEMM is checked.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core_backends.h"
#include "engine/io/safetensors.h"
#include "tests/cli/checkpoint_files.h"
#include "tests/cli/launch_helpers.h"
#include "tests/cli/run_dpv.h"

namespace dpv::testing {
namespace {

class GemmChoiceCheckpoint : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    if (!cpu_has_onednn()) GTEST_SKIP() << "a build without oneDNN has one GEMM library: nothing to choose";
  }
  // mlp-bn's products (batch 64 on one device, 32 per rank on two: 32x32x32 and up) are large
  // enough to be timed.
  std::vector<std::string> train(const std::string& dir, int64_t steps) const {
    return {"train", "--preset", "mlp-bn", "--devices", "cpu:1", "--seed", "4", "--steps", std::to_string(steps),
            "--checkpoint", dir, "--checkpoint-every", "5"};
  }
  const PinnedGemm auto_{"auto"};
};

std::vector<CpuGemmChoice> choices_in(const std::string& file) {
  const SafetensorsFile f = read_checkpoint(file);
  const auto it = f.metadata.find("gemm_choices");
  return it == f.metadata.end() ? std::vector<CpuGemmChoice>{} : parse_cpu_gemm_choices(it->second, file);
}

// Rewrites the checkpoint's metadata key (nullptr: removes it).
void set_metadata(const std::string& file, const std::string& key, const std::string* value) {
  SafetensorsFile f = read_checkpoint(file);
  if (value) f.metadata[key] = *value;
  else f.metadata.erase(key);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << serialize_safetensors(f.tensors, f.metadata);
}

TEST_F(GemmChoiceCheckpoint, AResumedRunMultipliesWithTheCheckpointsChoices) {
  const std::string dir = path("c");
  ASSERT_EQ(run_dpv(train(dir, 5)).exit_code, 0);
  std::vector<CpuGemmChoice> chosen = choices_in(checkpoint_file(dir, 5));
  ASSERT_GE(chosen.size(), 3u);  // forward, weight and input gradients of the 32x32 layer
  // Every shape the other way round: a resumed run that timed its own shapes would not record this.
  for (CpuGemmChoice& c : chosen)
    c.library = c.library == CpuGemmLibrary::Onednn ? CpuGemmLibrary::OpenBlas : CpuGemmLibrary::Onednn;
  const std::string flipped = cpu_gemm_choices_text(chosen);
  set_metadata(checkpoint_file(dir, 5), "gemm_choices", &flipped);
  const RunResult r = run_dpv(train(dir, 10));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(step 5)"), std::string::npos) << r.out;
  EXPECT_EQ(read_checkpoint(checkpoint_file(dir, 10)).metadata.at("gemm_choices"), flipped);
}

TEST_F(GemmChoiceCheckpoint, ACheckpointWithoutChoicesStillResumesAndTimesItsShapes) {
  const std::string dir = path("c");
  ASSERT_EQ(run_dpv(train(dir, 5)).exit_code, 0);
  set_metadata(checkpoint_file(dir, 5), "gemm_choices", nullptr);
  const RunResult r = run_dpv(train(dir, 10));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(choices_in(checkpoint_file(dir, 10)).size(), 3u);
}

TEST_F(GemmChoiceCheckpoint, AMalformedChoiceTableIsACorruptCheckpoint) {
  const std::string dir = path("c");
  ASSERT_EQ(run_dpv(train(dir, 5)).exit_code, 0);
  const std::string bad = "NT:32x32x32:0=mkl";
  set_metadata(checkpoint_file(dir, 5), "gemm_choices", &bad);
  expect_error(run_dpv(train(dir, 10)), {"metadata 'gemm_choices'", "'NT:32x32x32:0=mkl' is not a GEMM choice"});
}

// Two launched ranks: the exchange through the job's store works end to end (rank 1 waits for the
// key rank 0 writes for every timed shape; a key rank 0 never wrote would fail the job at the
// timeout), and rank 0's checkpoint records the per-rank shapes (32 samples each). That rank 1
// takes rank 0's choice over its own timing is gemm_choice_test's RankZerosChoiceWinsThroughTheStore.
TEST_F(GemmChoiceCheckpoint, ALaunchedTwoRankJobTakesRankZerosChoices) {
  const std::string dir = path("l");
  const RunResult r = run_dpv({"launch", "--nproc-per-node", "2", "--master-port", std::to_string(free_port()),
                               "--timeout", "60", "--", "train", "--preset", "mlp-bn", "--ddp", "--seed", "4",
                               "--steps", "5", "--checkpoint", dir, "--checkpoint-every", "5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<CpuGemmChoice> chosen = choices_in(checkpoint_file(dir, 5));
  ASSERT_GE(chosen.size(), 3u);
  for (const CpuGemmChoice& c : chosen)
    EXPECT_TRUE(c.shape.rows == 32 || c.shape.inner == 32) << cpu_gemm_choices_text({c});
}

TEST_F(GemmChoiceCheckpoint, ABadDpvGemmStopsBeforeAnything) {
  const PinnedGemm bad("fastest");
  const RunResult r = run_dpv(train(path("c"), 5));
  expect_error(r, {"DPV_GEMM='fastest' is not a GEMM library", "auto", "openblas or onednn"});
  EXPECT_FALSE(exists(path("c")));
}

}  // namespace
}  // namespace dpv::testing
