// The network quiz (lessons/quiz/10-network.json): it loads, has at least 6 questions, and every
// question is graded by the ddp_network scenario, whose answer must equal the one
// worked out here from the alpha-beta formula and PowerSGD's rule (r(m+n) for a matrix, 1-D tensors
// uncompressed), so a scenario that computed something else fails whatever option the file marks.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "course/quiz.h"
#include "course/scenario.h"
#include "course_test_util.h"

namespace dpv::course {
namespace {

using nlohmann::json;
using testing::quiz_dir;

std::vector<QuizQuestion> network_questions() {
  std::vector<QuizQuestion> out;
  for (const QuizQuestion& q : load_quiz(quiz_dir()).questions)
    if (q.source.find("10-network") != std::string::npos) out.push_back(q);
  return out;
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", fraction * 100);
  return text;
}

// The answer by the formulas, from the question's own parameters.
std::string expected_answer(const json& p) {
  const std::string ask = p.at("ask");
  const int w = p.at("devices");
  if (ask == "messages") return std::to_string(2 * (w - 1));
  if (ask == "overlap") return "overlap";             // bucket 0 goes out during the backward
  if (ask == "error_feedback_bytes") return "same";   // the residual is kept, never sent
  const double rate_bytes = p.at("rate") == "1gbit" ? 125e6 : p.at("rate") == "10gbit" ? 1.25e9 : 0;
  const std::string delay_text = p.value("delay", "0");
  const double alpha = delay_text == "10ms" ? 0.010 : delay_text == "1ms" ? 0.001 : 0;
  if (ask == "bytes_ratio") {
    if (p.at("hook") == "fp16") return percent(0.5);
    // One Linear(in, out), rank r: P [out, r] and Q [in, r] for the weight, the bias uncompressed.
    const json& layer = p.at("model").at("layers").at(0);
    const double in = layer.at("in_features"), out = layer.at("out_features"), r = p.value("rank", 1);
    return percent((r * (in + out) + out) / (in * out + out));
  }
  const double n = p.at("bytes");
  const double latency = 2 * (w - 1) * alpha, bandwidth = 2 * (w - 1) * n / w / rate_bytes;
  if (ask == "bound") return latency > bandwidth ? "latency" : "bandwidth";
  if (ask == "growth") {  // against 2 ranks: 2(W-1)/W n/b over n/b (no delay in the quiz's question)
    char text[32];
    std::snprintf(text, sizeof text, "%.1fx", (latency + bandwidth) / (2 * alpha + n / rate_bytes));
    return text;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", (latency + bandwidth) * 1e3);
  return text;
}

TEST(NetworkQuiz, LoadsWithAtLeastSixQuestions) {
  const QuizLoadResult all = load_quiz(quiz_dir());
  for (const auto& problem : all.problems) EXPECT_EQ(problem.find("10-network"), std::string::npos) << problem;
  const auto questions = network_questions();
  EXPECT_GE(questions.size(), 6u);
  int computed = 0;
  for (const QuizQuestion& q : questions) {
    SCOPED_TRACE(q.id);
    EXPECT_EQ(q.section, "ddp");
    EXPECT_GE(q.solution.size(), 2u);
    ASSERT_TRUE(q.scenario.has_value()) << "every question is graded by the engine";
    ++computed;
    EXPECT_EQ(q.scenario->type, "ddp_network");
    EXPECT_TRUE(scenario_problem(*q.scenario).empty()) << scenario_problem(*q.scenario);
  }
  EXPECT_GE(computed, 6);
}

TEST(NetworkQuiz, EveryScenarioAgreesWithTheMarkedAnswerAndTheFormula) {
  for (const QuizQuestion& q : network_questions()) {
    SCOPED_TRACE(q.id);
    ASSERT_TRUE(q.scenario.has_value());
    const std::string expected = expected_answer(json::parse(q.scenario->params_json));
    const ScenarioResult r = run_question_scenario(q);
    ASSERT_FALSE(r.failed) << (r.lines.empty() ? "" : r.lines.front());
    std::string said;
    for (const std::string& line : r.lines) said += line + "\n";
    EXPECT_EQ(r.answer_value, expected) << said;
    EXPECT_EQ(r.answer_label, q.correct);
    ASSERT_NE(q.option(q.correct), nullptr);
    EXPECT_EQ(q.option(q.correct)->value, expected) << "the marked option is not the formula's answer";
  }
}

TEST(NetworkQuiz, TheScenarioRefusesOneRank) {
  QuizScenario s;
  s.type = "ddp_network";
  s.params_json = R"({"devices": 1, "rate": "1gbit", "bytes": 1000, "ask": "messages"})";
  EXPECT_TRUE(scenario_problem(s).empty());
  EXPECT_TRUE(run_scenario(s).failed);
}

}  // namespace
}  // namespace dpv::course
