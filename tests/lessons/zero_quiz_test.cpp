// The ZeRO and FSDP quiz (lessons/quiz/09-zero.json): it validates, every question is graded by a
// zero_* scenario on the engine's sharded ranks, and each scenario's answer equals one worked out
// here from the question's model shapes and PyTorch 1.13's rules (the greedy partition, the padded
// flat parameter, FSDP's divide factors, ring traffic), so a scenario whose engine computed
// something else fails, whatever option the file marks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "course/quiz.h"
#include "course/scenario.h"
#include "course_test_util.h"
#include "engine/model_spec.h"
#include "engine/number_text.h"

namespace dpv::course {
namespace {

using nlohmann::json;
using testing::quiz_dir;

struct Extent {
  std::string name;
  int64_t numel;
};
// Linear layers only (the quiz's models): weight [out, in], bias [out], named by layer index.
std::vector<Extent> extents(const json& model) {
  std::vector<Extent> out;
  const json& layers = model.at("layers");
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].at("type") != "linear") continue;
    const int64_t in = layers[i].at("in_features"), o = layers[i].at("out_features");
    out.push_back({std::to_string(i) + ".weight", in * o});
    out.push_back({std::to_string(i) + ".bias", o});
  }
  return out;
}

std::vector<std::vector<std::string>> greedy(std::vector<Extent> params, int world) {
  std::stable_sort(params.begin(), params.end(), [](const Extent& a, const Extent& b) { return a.numel > b.numel; });
  std::vector<std::vector<std::string>> ranks(static_cast<size_t>(world));
  std::vector<int64_t> load(static_cast<size_t>(world), 0);
  for (const Extent& p : params) {
    const size_t r = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    ranks[r].push_back(p.name);
    load[r] += p.numel;
  }
  return ranks;
}

std::string two_places(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// The answer a zero_* scenario must give for `p`, worked out without the engine.
std::string expected_answer(const std::string& type, const json& p) {
  const std::vector<Extent> params = extents(p.at("model"));
  int64_t psi = 0;
  for (const Extent& e : params) psi += e.numel;
  const int w = p.at("devices"), stage = p.at("stage");
  const std::string ask = p.at("ask");
  const int64_t padded = (psi + w - 1) / w * w;
  if (ask == "owned_count") return std::to_string(greedy(params, w).at(p.at("rank").get<size_t>()).size());
  if (ask == "owner") {
    const auto ranks = greedy(params, w);
    for (size_t r = 0; r < ranks.size(); ++r)
      if (std::count(ranks[r].begin(), ranks[r].end(), p.at("param").get<std::string>())) return std::to_string(r);
  }
  if (ask == "broadcasts") return std::to_string(params.size());
  if (ask == "padding") return std::to_string(padded - psi);
  if (ask == "shard_numel") return std::to_string(padded / w);
  if (ask == "divide") {
    int pre = 1;
    while (w % pre == 0 && w / pre > pre) pre *= 2;
    return shortest_text(pre) + "," + shortest_text(double(w) / pre);
  }
  if (type == "zero_traffic" && ask == "vs_ddp") {
    const double pass = double(w - 1) / w * 4;  // bytes per element per ring pass, float32
    const double ddp = 2 * pass * psi;
    const double zero = stage == 1 ? ddp + pass * psi : (stage == 2 ? 2 : 3) * pass * padded;
    return two_places(zero / ddp);
  }
  // FSDP frees the gathered parameters and the full gradient after the backward (both sharded
  // strategies); ZeroRedundancyOptimizer keeps DDP's full parameters and gradients.
  if (ask == "persistent")
    return stage == 1 ? "params:full,grads:full,optim:part,gathered:none" : "params:slice,grads:slice,optim:slice,gathered:none";
  if (ask == "grad_shards") return "2";
  if (type == "zero_state" && ask == "vs_ddp") return "same";
  if (ask == "padding_state") return "zero";
  // The whole model as one FSDP unit: the backward's all-gather brings it all back.
  if (ask == "zero3_vs_zero2") return "same-peak+one-more-gather";
  return "(no expectation for " + ask + ")";
}

std::vector<QuizQuestion> zero_questions() {
  std::vector<QuizQuestion> out;
  for (const QuizQuestion& q : load_quiz(quiz_dir()).questions)
    if (q.source.find("09-zero") != std::string::npos) out.push_back(q);
  return out;
}

TEST(ZeroQuiz, LoadsWithAtLeastTenQuestionsEachGradedByAZeroScenario) {
  const QuizLoadResult all = load_quiz(quiz_dir());
  for (const auto& problem : all.problems) EXPECT_EQ(problem.find("09-zero"), std::string::npos) << problem;
  const auto questions = zero_questions();
  EXPECT_GE(questions.size(), 10u);
  for (const QuizQuestion& q : questions) {
    SCOPED_TRACE(q.id);
    ASSERT_TRUE(q.scenario.has_value());
    EXPECT_EQ(q.scenario->type.rfind("zero_", 0), 0u);
    EXPECT_TRUE(scenario_problem(*q.scenario).empty()) << scenario_problem(*q.scenario);
    EXPECT_GE(q.solution.size(), 2u);
    EXPECT_TRUE(std::any_of(q.solution.begin(), q.solution.end(), [](const std::string& s) { return s.rfind("Run it:", 0) == 0; }));
  }
}

TEST(ZeroQuiz, EveryScenarioAgreesWithTheMarkedAnswerAndAnIndependentCount) {
  for (const QuizQuestion& q : zero_questions()) {
    SCOPED_TRACE(q.id);
    const json params = json::parse(q.scenario->params_json);
    const std::string expected = expected_answer(q.scenario->type, params);
    const ScenarioResult r = run_question_scenario(q);
    ASSERT_FALSE(r.failed) << (r.lines.empty() ? "" : r.lines.front());
    EXPECT_EQ(r.answer_value, expected);
    EXPECT_EQ(r.answer_label, q.correct);
    ASSERT_NE(q.option(q.correct), nullptr);
    EXPECT_EQ(q.option(q.correct)->value, expected) << "the marked option is not the rule's answer";
  }
}

// The same scenarios on other device counts: the engine follows the rules, not the quiz's numbers.
TEST(ZeroQuiz, PartitionAndFlatLayoutFollowTheRulesOnEveryDeviceCount) {
  const json model = json::parse(R"({"layers": [{"type": "linear", "in_features": 7, "out_features": 5},
      {"type": "relu"}, {"type": "linear", "in_features": 5, "out_features": 3}]})");
  for (int w = 1; w <= 8; ++w) {
    for (const char* ask : {"owned_count", "broadcasts", "padding", "shard_numel", "divide"}) {
      SCOPED_TRACE(std::string(ask) + " on " + std::to_string(w));
      const bool zero1 = std::string(ask) == "owned_count" || std::string(ask) == "broadcasts";
      json p = {{"devices", w}, {"batch", 2 * w}, {"stage", zero1 ? 1 : 3}, {"ask", ask}, {"model", model}};
      if (std::string(ask) == "owned_count") p["rank"] = w - 1;
      const ScenarioResult r = run_scenario({"zero_layout", p.dump()});
      ASSERT_FALSE(r.failed) << (r.lines.empty() ? "" : r.lines.front());
      EXPECT_EQ(r.answer_value, expected_answer("zero_layout", p));
    }
    if (w < 2) continue;
    for (int stage : {1, 2, 3}) {
      const json p = {{"devices", w}, {"batch", 2 * w}, {"stage", stage}, {"ask", "vs_ddp"}, {"model", model}};
      const ScenarioResult r = run_scenario({"zero_traffic", p.dump()});
      ASSERT_FALSE(r.failed) << (r.lines.empty() ? "" : r.lines.front());
      EXPECT_EQ(r.answer_value, expected_answer("zero_traffic", p)) << "stage " << stage << " on " << w;
    }
  }
}

TEST(ZeroQuiz, AQuestionAboutTheWrongStageIsAnErrorNotAnAnswer) {
  const ScenarioResult r = run_scenario({"zero_layout", R"({"devices": 2, "batch": 4, "stage": 2, "ask": "owned_count"})"});
  EXPECT_TRUE(r.failed);
  ASSERT_FALSE(r.lines.empty());
  EXPECT_NE(r.lines.front().find("set 'stage' to 1"), std::string::npos) << r.lines.front();
  EXPECT_FALSE(scenario_problem({"zero_state", R"({"devices": 2, "batch": 4, "stage": 4, "ask": "persistent"})"}).empty());
}

}  // namespace
}  // namespace dpv::course
