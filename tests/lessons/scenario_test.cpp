// Every question's scenario runs on the engine, and the answer the engine implies is the option
// the quiz file marks correct. Then the document's scenarios are checked in detail.
#include <gtest/gtest.h>

#include <algorithm>

#include "course_test_util.h"
#include "course/quiz.h"
#include "course/scenario.h"
#include "engine/data_parallel.h"

namespace dpv::course {
namespace {

using testing::quiz_dir;

const QuizLoadResult& quiz() {
  static const QuizLoadResult q = load_quiz(quiz_dir());
  return q;
}

const QuizQuestion& question(const std::string& id) {
  for (const auto& q : quiz().questions)
    if (q.id == id) return q;
  throw std::runtime_error("no question " + id);
}

std::string fact(const ScenarioResult& r, const std::string& key) {
  for (const auto& [k, v] : r.facts)
    if (k == key) return v;
  return "(no fact '" + key + "')";
}

std::string text_of(const ScenarioResult& r) {
  std::string s = r.title + "\n";
  for (const auto& l : r.lines) s += "  " + l + "\n";
  return s;
}

class EveryScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryScenario, EngineImpliesTheMarkedAnswer) {
  const QuizQuestion& q = question(GetParam());
  ASSERT_TRUE(q.scenario.has_value());
  const ScenarioResult r = run_question_scenario(q);
  ASSERT_FALSE(r.failed) << text_of(r);
  EXPECT_FALSE(r.answer_value.empty()) << text_of(r);
  EXPECT_EQ(r.answer_label, q.correct) << "engine answered '" << r.answer_value << "'\n" << text_of(r);
  EXPECT_FALSE(r.lines.empty());
}

std::vector<std::string> scenario_ids() {
  std::vector<std::string> ids;
  for (const auto& q : quiz().questions)
    if (q.scenario) ids.push_back(q.id);
  return ids;
}

INSTANTIATE_TEST_SUITE_P(Quiz, EveryScenario, ::testing::ValuesIn(scenario_ids()),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace_if(n.begin(), n.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
                           return n;
                         });

TEST(DocumentScenarios, Q3SplitsIntoFourAndFourAndGathersEightByTen) {
  const ScenarioResult r = run_question_scenario(question("doc-3-output-shape"));
  ASSERT_FALSE(r.failed) << text_of(r);
  EXPECT_EQ(fact(r, "chunks"), "4, 4");
  EXPECT_EQ(fact(r, "output shape"), "[8, 10]");
  EXPECT_EQ(fact(r, "output device"), "0");
  EXPECT_NE(text_of(r).find("torch.Size([8, 10])"), std::string::npos) << text_of(r);
  EXPECT_EQ(r.answer_label, "A");
  // The sentence naming the option is marked, so the quiz can hold it back until the learner answers.
  ASSERT_GE(r.answer_line, 0);
  ASSERT_LT(r.answer_line, static_cast<int>(r.lines.size()));
  EXPECT_EQ(r.lines[static_cast<size_t>(r.answer_line)], "The engine's result matches option A.");
}

TEST(DocumentScenarios, Q4ShowsTheEnginesDtypeError) {
  const ScenarioResult r = run_question_scenario(question("doc-4-dtype"));
  ASSERT_FALSE(r.failed) << text_of(r);
  const std::string error = fact(r, "error");
  // The error is the engine's own text, not the question's: it names both dtypes.
  EXPECT_NE(error.find("Double"), std::string::npos) << error;
  EXPECT_NE(error.find("Float"), std::string::npos) << error;
  EXPECT_NE(text_of(r).find(error), std::string::npos);
  EXPECT_EQ(r.answer_value, "dtype");
  EXPECT_EQ(r.answer_label, "D");
}

TEST(DocumentScenarios, Q5ReportsPerDeviceAndGlobalStatistics) {
  const QuizQuestion& q = question("doc-5-batchnorm");
  EXPECT_EQ(q.link, "bnlab");
  const ScenarioResult r = run_question_scenario(q);
  ASSERT_FALSE(r.failed) << text_of(r);
  const std::string text = text_of(r);
  EXPECT_NE(text.find("Device 0 (4 rows): mean"), std::string::npos) << text;
  EXPECT_NE(text.find("Device 1 (4 rows): mean"), std::string::npos) << text;
  EXPECT_NE(text.find("Synchronised (global) mean over all 8 rows"), std::string::npos) << text;
  EXPECT_NE(text.find("(the same as the synchronised one)"), std::string::npos) << text;
  EXPECT_EQ(r.answer_label, "A");
}

TEST(Scenarios, ScatterAgreesWithChunkSizesForManyBatches) {
  // The scenario reads the Scatter stage's event; the rule is torch.chunk's.
  for (int k : {2, 3, 4}) {
    for (int n : {1, 3, 5, 6, 9, 10, 13}) {
      SCOPED_TRACE("batch " + std::to_string(n) + " on " + std::to_string(k));
      const ScenarioResult r = run_scenario({"scatter", "{\"batch\": " + std::to_string(n) + ", \"devices\": " +
                                                            std::to_string(k) + ", \"ask\": \"chunks\"}"});
      ASSERT_FALSE(r.failed) << text_of(r);
      std::string expected;
      for (int64_t c : dpv::chunk_sizes(n, k)) expected += (expected.empty() ? "" : ",") + std::to_string(c);
      EXPECT_EQ(r.answer_value, expected);
    }
  }
}

TEST(Scenarios, OneSampleChunkErrorIsTheEnginesValueError) {
  const ScenarioResult r = run_scenario({"batchnorm", R"({"devices": 4, "batch": 10, "ask": "one_sample"})"});
  ASSERT_FALSE(r.failed) << text_of(r);
  EXPECT_EQ(r.answer_value, "raises");
  EXPECT_NE(fact(r, "error").find("Expected more than 1 value per channel when training"), std::string::npos) << text_of(r);
  EXPECT_EQ(fact(r, "chunks"), "3, 3, 3, 1");
  // With an even split there is no one-sample chunk and no error.
  const ScenarioResult even = run_scenario({"batchnorm", R"({"devices": 4, "batch": 12, "ask": "one_sample"})"});
  EXPECT_EQ(even.answer_value, "runs") << text_of(even);
}

TEST(Scenarios, ScenarioThatCannotRunReportsInsteadOfThrowing) {
  const ScenarioResult r = run_scenario({"output_shape", R"({"devices": 2, "input_shape": [8, 7], "preset": "simple"})"});
  // Linear(10, 2) on 7 features: the engine refuses; the scenario reports the engine's message.
  EXPECT_EQ(r.answer_value, "error") << text_of(r);
  EXPECT_FALSE(fact(r, "error").empty());
}

}  // namespace
}  // namespace dpv::course
