// The DDP scenarios against independent computations: the sampler's shards, rank 0's loss, the
// 1/W of the averaged gradients for several world sizes, and parameter checks.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "course/scenario.h"
#include "engine/ddp/sampler.h"

namespace dpv::course {
namespace {

ScenarioResult run(const std::string& type, const std::string& params) { return run_scenario({type, params}); }

std::string fact(const ScenarioResult& r, const std::string& key) {
  for (const auto& [k, v] : r.facts)
    if (k == key) return v;
  return "(no fact '" + key + "')";
}

TEST(DdpScenarios, SamplerShardsAreTheSamplersForEveryRank) {
  SamplerOptions plain;
  plain.shuffle = false;
  for (int W : {2, 3, 4}) {
    for (int rank = 0; rank < W; ++rank) {
      const auto r = run("sampler", R"({"dataset": 11, "devices": )" + std::to_string(W) + R"(, "rank": )" +
                                        std::to_string(rank) + R"(, "ask": "rank_indices"})");
      ASSERT_FALSE(r.failed);
      std::string expected;
      for (int64_t i : distributed_sampler_indices(11, W, rank, plain)) expected += (expected.empty() ? "" : ",") + std::to_string(i);
      EXPECT_EQ(r.answer_value, expected) << "W=" << W << " rank " << rank;
    }
  }
  EXPECT_EQ(run("sampler", R"({"dataset": 10, "devices": 4, "drop_last": true, "ask": "counted"})").answer_value, "8");
  EXPECT_EQ(run("sampler", R"({"dataset": 12, "devices": 4, "ask": "duplicates"})").answer_value, "none");
  EXPECT_EQ(run("sampler", R"({"dataset": 1000, "devices": 8, "batch": 16, "ask": "steps_per_epoch"})").answer_value, "8");
}

TEST(DdpScenarios, PrintedLossIsRankZerosAndTheMeanIsTheWholeBatch) {
  const auto r = run("ddp_loss", R"({"devices": 4, "batch": 16, "ask": "printed_loss"})");
  ASSERT_FALSE(r.failed);
  EXPECT_EQ(r.answer_value, "rank0");
  // Equal shards: the mean of the ranks' losses is the whole-batch loss; rank 0's is not.
  EXPECT_EQ(fact(r, "mean over ranks"), fact(r, "whole batch"));
  EXPECT_NE(fact(r, "rank 0 loss"), fact(r, "whole batch"));
  // One rank: its loss is the whole batch's.
  EXPECT_EQ(run("ddp_loss", R"({"devices": 1, "batch": 8, "ask": "printed_loss"})").answer_value, "global");
}

TEST(DdpScenarios, AveragedGradientIsOneOverWOfTheRanksSum) {
  for (int W : {2, 4, 8}) {
    const auto r = run("ddp_gradients", R"({"devices": )" + std::to_string(W) + R"(, "batch": 16, "ask": "reduction"})");
    ASSERT_FALSE(r.failed) << r.lines.front();
    EXPECT_EQ(r.answer_value, "mean");
    EXPECT_NEAR(std::stod(fact(r, "ratio to the sum")), 1.0 / W, 1e-5);
  }
  // Equal shards: the same as one device on the whole batch; padded shards: not.
  EXPECT_EQ(run("ddp_gradients", R"({"devices": 4, "batch": 12, "ask": "vs_single"})").answer_value, "same");
  EXPECT_EQ(run("ddp_gradients", R"({"devices": 4, "batch": 10, "ask": "vs_single"})").answer_value, "differs");
  EXPECT_EQ(run("ddp_gradients", R"({"devices": 3, "batch": 12, "lr": 0.5, "ask": "matching_step"})").answer_value,
            "global@lr");
}

TEST(DdpScenarios, BuffersFollowRankZeroOnlyWhenBroadcast) {
  EXPECT_EQ(run("ddp_buffers", R"({"devices": 2, "batch": 8, "ask": "after_step"})").answer_value, "differs");
  EXPECT_EQ(run("ddp_buffers", R"({"devices": 2, "batch": 8, "ask": "next_forward"})").answer_value, "rank0");
  EXPECT_EQ(run("ddp_buffers", R"({"devices": 2, "batch": 8, "broadcast_buffers": false, "ask": "next_forward"})").answer_value,
            "own");
  EXPECT_EQ(run("ddp_buffers", R"({"devices": 3, "batch": 9, "sync_bn": true, "ask": "after_step"})").answer_value, "same");
}

TEST(DdpScenarios, OneRankHasOneBucketAndNoPeakDevice) {
  const auto r = run("ddp_memory", R"({"devices": 2, "batch": 16, "ask": "peak_devices"})");
  ASSERT_FALSE(r.failed);
  EXPECT_EQ(r.answer_value, "0|equal");
  // Linear(10, 2) is far below 1 MiB: one bucket before and after the rebuild, launched at the end.
  EXPECT_EQ(run("ddp_buckets", R"({"devices": 2, "batch": 8, "preset": "simple", "ask": "counts"})").answer_value, "1,1");
  EXPECT_EQ(run("ddp_buckets", R"({"devices": 2, "batch": 8, "preset": "simple", "ask": "why_faster"})").answer_value, "once");
}

TEST(DdpScenarios, BadParametersAreProblemsNotCrashes) {
  EXPECT_NE(scenario_problem({"sampler", R"({"dataset": 10, "devices": 4, "rank": 4, "ask": "rank_indices"})"}), "");
  EXPECT_NE(scenario_problem({"sampler", R"({"dataset": 0, "devices": 4, "ask": "counted"})"}), "");
  EXPECT_NE(scenario_problem({"ddp_gradients", R"({"devices": 2, "batch": 8, "lr": "big", "ask": "matching_step"})"}), "");
  EXPECT_NE(scenario_problem({"ddp_buffers", R"({"devices": 2, "batch": 8, "ask": "whenever"})"}), "");
  EXPECT_EQ(scenario_problem({"ddp_buckets", R"({"devices": 2, "batch": 8, "ask": "counts"})"}), "");
  const auto r = run("ddp_buffers", R"({"devices": 2, "batch": 8, "features": 65, "ask": "after_step"})");
  EXPECT_TRUE(r.failed);
}

}  // namespace
}  // namespace dpv::course
