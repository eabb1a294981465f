// The ddp_resume scenario (a DDP job restarted from a checkpoint): restored with its optimizer's
// state the job ends bit for bit where the uninterrupted one does, for every optimizer and world
// size tried; without that state a stateful optimizer ends elsewhere (so the comparison is able to
// see a difference); and the parameter checks.
#include <gtest/gtest.h>

#include <string>

#include "course/scenario.h"

namespace dpv::course {
namespace {

ScenarioResult run(const std::string& params) { return run_scenario({"ddp_resume", params}); }

std::string fact(const ScenarioResult& r, const std::string& key) {
  for (const auto& [k, v] : r.facts)
    if (k == key) return v;
  return "(no fact '" + key + "')";
}

TEST(DdpResumeScenario, WithTheOptimizerStateTheRestartIsTheUninterruptedRunBitForBit) {
  for (const char* optimizer : {"sgd", "adam", "adamw"}) {
    for (int world : {2, 3}) {
      SCOPED_TRACE(std::string(optimizer) + " on " + std::to_string(world) + " ranks");
      const auto r = run(R"({"devices": )" + std::to_string(world) + R"(, "batch": 12, "steps": 5, "resume_after": 2, "optimizer": ")" +
                         optimizer + R"(", "ask": "final_weights"})");
      ASSERT_FALSE(r.failed) << r.lines.front();
      EXPECT_EQ(r.answer_value, "same");
      EXPECT_EQ(fact(r, "with optimizer state"), "identical, bit for bit");
    }
  }
}

TEST(DdpResumeScenario, WithoutTheOptimizerStateAStatefulOptimizerEndsElsewhere) {
  for (const char* optimizer : {"sgd", "adam"}) {
    SCOPED_TRACE(optimizer);
    const auto r = run(R"({"devices": 2, "batch": 8, "steps": 6, "resume_after": 3, "optimizer": ")" + std::string(optimizer) +
                       R"(", "ask": "checkpoint_contents"})");
    ASSERT_FALSE(r.failed) << r.lines.front();
    EXPECT_EQ(r.answer_value, "weights+optimizer");
    EXPECT_NE(fact(r, "weights only").find("largest difference"), std::string::npos) << fact(r, "weights only");
  }
}

TEST(DdpResumeScenario, ParametersAreChecked) {
  auto problem = [](const std::string& params) { return scenario_problem({"ddp_resume", params}); };
  EXPECT_EQ(problem(R"({"devices": 2, "batch": 8, "steps": 6, "resume_after": 3, "ask": "final_weights"})"), "");
  EXPECT_EQ(problem(R"({"devices": 2, "batch": 8, "steps": 6, "resume_after": 6, "ask": "final_weights"})"),
            "'resume_after' must be less than 'steps'");
  EXPECT_EQ(problem(R"({"devices": 2, "batch": 8, "steps": 21, "resume_after": 3, "ask": "final_weights"})"),
            "'steps' must be between 2 and 20");
  EXPECT_NE(problem(R"({"devices": 2, "batch": 8, "steps": 6, "resume_after": 3, "optimizer": "rmsprop", "ask": "final_weights"})")
                .find("'optimizer': "),
            std::string::npos);
  EXPECT_EQ(problem(R"({"devices": 2, "batch": 8, "steps": 6, "ask": "final_weights"})"), "'resume_after' is missing from params");
  EXPECT_TRUE(run(R"({"devices": 2, "batch": 8, "steps": 6, "resume_after": 0, "ask": "final_weights"})").failed);
}

}  // namespace
}  // namespace dpv::course
