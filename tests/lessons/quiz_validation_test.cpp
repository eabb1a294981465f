// Malformed quiz files: each problem names the file, the question and what is wrong, and the
// questions that are fine still load.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "course_test_util.h"
#include "course/quiz.h"
#include "course/scenario.h"

namespace dpv::course {
namespace {

using nlohmann::json;
using testing::TempDir;

json good_question(const std::string& id) {
  return json{{"id", id},
              {"difficulty", "easy"},
              {"prompt", "How many rows?"},
              {"options", json::array({"one", "two", "three"})},
              {"correct", "B"},
              {"solution", json::array({"step 1", "step 2"})},
              {"quick_check", "two"},
              {"hint", "count"},
              {"mistakes", json::array({"m1", "m2"})}};
}

std::string all(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

// Parses a one-question file and returns its single problem (fails the test if it is not exactly one).
std::string problem_of(const json& question) {
  const QuizLoadResult r = parse_quiz_file(question.dump(), "bad.json");
  EXPECT_TRUE(r.questions.empty());
  EXPECT_EQ(r.problems.size(), 1u) << all(r.problems);
  return r.problems.empty() ? std::string() : r.problems.front();
}

TEST(QuizValidation, GoodQuestionLoads) {
  const QuizLoadResult r = parse_quiz_file(good_question("q1").dump(), "good.json");
  ASSERT_TRUE(r.problems.empty()) << all(r.problems);
  ASSERT_EQ(r.questions.size(), 1u);
  EXPECT_EQ(r.questions[0].options[1].label, "B");
  EXPECT_EQ(r.questions[0].correct_index(), 1);
  EXPECT_EQ(r.questions[0].origin, QuizOrigin::Dpviz);
  EXPECT_EQ(r.questions[0].source, "good.json");
}

TEST(QuizValidation, OriginIsReadOnceIntoItsValue) {
  json q = good_question("doc");
  q["origin"] = "document";
  QuizLoadResult r = parse_quiz_file(q.dump(), "doc.json");
  ASSERT_EQ(r.questions.size(), 1u) << all(r.problems);
  EXPECT_EQ(r.questions[0].origin, QuizOrigin::Document);

  q["origin"] = "dpviz";
  r = parse_quiz_file(q.dump(), "ours.json");
  ASSERT_EQ(r.questions.size(), 1u) << all(r.problems);
  EXPECT_EQ(r.questions[0].origin, QuizOrigin::Dpviz);

  q["origin"] = "blog";
  const std::string p = problem_of(q);
  EXPECT_NE(p.find("'origin' is 'blog'; expected document or dpviz"), std::string::npos) << p;
}

TEST(QuizValidation, AScenariosSetupIsReadFromItsParameters) {
  ScenarioSetup s = scenario_setup(QuizScenario{"batchnorm", R"({"devices": 3, "batch": 7, "preset": "mlp-bn", "sync_bn": true})"});
  EXPECT_EQ(s.devices, 3);
  EXPECT_EQ(s.batch, 7);
  EXPECT_EQ(s.preset, "mlp-bn");
  ASSERT_TRUE(s.sync_bn.has_value());
  EXPECT_TRUE(*s.sync_bn);
  // The batch from the input's shape; what is not named, out of range or not a preset counts as none.
  s = scenario_setup(QuizScenario{"scatter", R"({"devices": 9, "input_shape": [8, 10], "preset": "resnet", "sync_bn": false})"});
  EXPECT_EQ(s.devices, 0);
  EXPECT_EQ(s.batch, 8);
  EXPECT_EQ(s.preset, "");
  ASSERT_TRUE(s.sync_bn.has_value());
  EXPECT_FALSE(*s.sync_bn);
  s = scenario_setup(QuizScenario{"scatter", "{}"});
  EXPECT_EQ(s.devices, 0);
  EXPECT_EQ(s.batch, 0);
  EXPECT_FALSE(s.sync_bn.has_value());
  s = scenario_setup(QuizScenario{"scatter", "not json"});
  EXPECT_EQ(s.devices, 0);
  EXPECT_EQ(s.batch, 0);
}

TEST(QuizValidation, InvalidJsonNamesTheFile) {
  const QuizLoadResult r = parse_quiz_file("{\"id\": ", "broken.json");
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("broken.json"), std::string::npos);
  EXPECT_NE(r.problems[0].find("not valid JSON"), std::string::npos);
}

TEST(QuizValidation, EachFieldProblemIsNamed) {
  json q = good_question("x");
  q.erase("prompt");
  EXPECT_NE(problem_of(q).find("'prompt' is missing"), std::string::npos);

  q = good_question("x");
  q["correct"] = "E";
  std::string p = problem_of(q);
  EXPECT_NE(p.find("'correct' is 'E'"), std::string::npos) << p;
  EXPECT_NE(p.find("question 'x'"), std::string::npos) << p;
  EXPECT_NE(p.find("bad.json"), std::string::npos) << p;

  q = good_question("x");
  q["options"] = json::array({"a", "b", "c", "d", "e", "f", "g"});
  EXPECT_NE(problem_of(q).find("2 to 6 options, found 7"), std::string::npos);

  q = good_question("x");
  q["options"] = json::array({"only"});
  EXPECT_NE(problem_of(q).find("found 1"), std::string::npos);

  q = good_question("x");
  q["difficulty"] = "impossible";
  EXPECT_NE(problem_of(q).find("'difficulty' is 'impossible'"), std::string::npos);

  q = good_question("x");
  q["link"] = "nowhere";
  EXPECT_NE(problem_of(q).find("'link' is 'nowhere'"), std::string::npos);

  q = good_question("x");
  q["mistakes"] = 3;
  EXPECT_NE(problem_of(q).find("'mistakes' must be a list"), std::string::npos);

  q = good_question("x");
  q["promt"] = "typo";
  EXPECT_NE(problem_of(q).find("unknown field 'promt'"), std::string::npos);

  q = good_question("x");
  q["options"][1] = json{{"text", "two"}, {"label", "C"}};
  EXPECT_NE(problem_of(q).find("option 2"), std::string::npos);
}

TEST(QuizValidation, ScenarioProblemsAreNamed) {
  json q = good_question("s");
  q["scenario"] = json{{"type", "teleport"}, {"params", json::object()}};
  EXPECT_NE(problem_of(q).find("unknown type 'teleport'"), std::string::npos);

  q = good_question("s");
  q["scenario"] = json{{"type", "scatter"}, {"params", {{"batch", 10}, {"ask", "chunks"}}}};
  EXPECT_NE(problem_of(q).find("'devices' is missing"), std::string::npos);

  q = good_question("s");
  q["scenario"] = json{{"type", "scatter"}, {"params", {{"batch", 10}, {"devices", 4}, {"ask", "colour"}}}};
  EXPECT_NE(problem_of(q).find("'ask' is 'colour'"), std::string::npos);

  q = good_question("s");
  q["scenario"] = json{{"type", "scatter"}, {"params", {{"batch", "ten"}, {"devices", 4}, {"ask", "chunks"}}}};
  EXPECT_NE(problem_of(q).find("'batch' must be an integer"), std::string::npos);

  // A valid scenario but no option values: the engine's answer could not be matched.
  q = good_question("s");
  q["scenario"] = json{{"type", "scatter"}, {"params", {{"batch", 10}, {"devices", 4}, {"ask", "chunks"}}}};
  EXPECT_NE(problem_of(q).find("no option has a \"value\""), std::string::npos);
}

TEST(QuizValidation, ScenarioProblemChecksWithoutRunning) {
  EXPECT_EQ(scenario_problem({"scatter", R"({"batch": 10, "devices": 4, "ask": "chunks"})"}), "");
  EXPECT_NE(scenario_problem({"scatter", R"({"batch": 10, "devices": 40, "ask": "chunks"})"}), "");
  EXPECT_NE(scenario_problem({"scatter", "not json"}), "");
  EXPECT_NE(scenario_problem({"loss_in_model", R"({"batch": 2, "devices": 2, "ask": "x"})"}), "");
  EXPECT_NE(scenario_problem({"output_shape", R"({"devices": 2, "input_shape": [4, 10], "preset": "no-such-preset"})"}), "");
  EXPECT_NE(scenario_problem({"batchnorm", R"({"devices": 2, "batch": 4, "ask": "one_sample", "extra": 1})"}), "");
  const ScenarioResult r = run_scenario({"nope", "{}"});
  EXPECT_TRUE(r.failed);
  ASSERT_FALSE(r.lines.empty());
  EXPECT_NE(r.lines[0].find("unknown type 'nope'"), std::string::npos);
}

TEST(QuizValidation, BadQuestionInAGroupLeavesTheOthers) {
  json bad = good_question("bad");
  bad.erase("hint");
  const json group{{"questions", json::array({good_question("a"), bad, good_question("c"), good_question("a")})}};
  const QuizLoadResult r = parse_quiz_file(group.dump(), "group.json");
  ASSERT_EQ(r.questions.size(), 2u) << all(r.problems);
  EXPECT_EQ(r.questions[0].id, "a");
  EXPECT_EQ(r.questions[1].id, "c");
  ASSERT_EQ(r.problems.size(), 2u) << all(r.problems);
  EXPECT_NE(r.problems[0].find("question 'bad': 'hint' is missing"), std::string::npos) << r.problems[0];
  EXPECT_NE(r.problems[1].find("used twice"), std::string::npos) << r.problems[1];
}

TEST(QuizValidation, FolderLoadKeepsGoodFilesAndReportsBadOnes) {
  TempDir dir;
  dir.write("01-good.json", good_question("g1").dump());
  dir.write("02-broken.json", "[1, 2");
  dir.write("03-array.json", "[1, 2]");
  dir.write("04-good.json", json{{"questions", json::array({good_question("g2"), good_question("g1")})}}.dump());
  dir.write("05-latin1.json", std::string("{\"id\": \"caf\xE9\"}"));
  dir.write("notes.txt", "not a quiz file");
  const QuizLoadResult r = load_quiz(dir.str());
  ASSERT_EQ(r.questions.size(), 2u) << all(r.problems);
  EXPECT_EQ(r.questions[0].id, "g1");
  EXPECT_EQ(r.questions[1].id, "g2");
  ASSERT_EQ(r.problems.size(), 4u) << all(r.problems);
  EXPECT_NE(r.problems[0].find("02-broken.json: not valid JSON"), std::string::npos);
  EXPECT_NE(r.problems[1].find("03-array.json: expected a question object"), std::string::npos);
  EXPECT_NE(r.problems[2].find("04-good.json: question 'g1': id already used"), std::string::npos);
  EXPECT_NE(r.problems[3].find("05-latin1.json: not valid UTF-8"), std::string::npos);
}

TEST(QuizValidation, ANumberPastDoubleIsAProblemOfThatFileOnly) {
  // nlohmann throws out_of_range (not parse_error) for 1e400; it once escaped and aborted the load.
  TempDir dir;
  dir.write("01-good.json", good_question("g1").dump());
  std::string huge = good_question("h").dump();
  huge.insert(huge.size() - 1, ", \"comment\": 1e400");
  dir.write("02-huge.json", huge);
  dir.write("03-good.json", good_question("g2").dump());
  QuizLoadResult r;
  ASSERT_NO_THROW(r = load_quiz(dir.str()));
  ASSERT_EQ(r.questions.size(), 2u) << all(r.problems);
  ASSERT_EQ(r.problems.size(), 1u) << all(r.problems);
  EXPECT_NE(r.problems[0].find("02-huge.json: not valid JSON"), std::string::npos) << r.problems[0];
}

TEST(QuizValidation, ScenarioSizesCannotWrapOrAskForGigabytes) {
  // 2^32 + 1 read as an int is 1: it must not pass the 1..8 device range.
  EXPECT_NE(scenario_problem({"scatter", R"({"batch": 10, "devices": 4294967297, "ask": "chunks"})"}), "");
  EXPECT_NE(scenario_problem({"scatter", R"({"batch": 18446744073709551615, "devices": 2, "ask": "chunks"})"}), "");
  EXPECT_NE(scenario_problem({"output_shape", R"({"devices": 2, "input_shape": [100000, 100000, 10]})"}), "");
  EXPECT_NE(scenario_problem({"output_shape", R"({"devices": 2, "input_shape": [4, -7]})"}), "");
  EXPECT_EQ(scenario_problem({"output_shape", R"({"devices": 2, "input_shape": [4, 10], "preset": "simple"})"}), "");
}

TEST(QuizValidation, MissingFolderIsAProblemNotACrash) {
  const QuizLoadResult r = load_quiz("/nonexistent/dpv/quiz");
  EXPECT_TRUE(r.questions.empty());
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("is missing"), std::string::npos);
}

}  // namespace
}  // namespace dpv::course

// Per-option feedback: an option may say why it is right or wrong, and one that works as well as
// the canonical answer ("also_correct") counts as right.
namespace dpv::course {
namespace {

json withOptionB(json b) {
  json q = good_question("q-also");
  q["options"] = json::array({"one", std::move(b), "three"});
  q["correct"] = "C";
  return q;
}

TEST(QuizValidation, AnOptionMayCarryFeedbackAndBeAcceptedToo) {
  const QuizLoadResult r =
      parse_quiz_file(withOptionB(json{{"text", "two"}, {"feedback", "the same class"}, {"also_correct", true}}).dump(), "also.json");
  ASSERT_EQ(r.questions.size(), 1u) << all(r.problems);
  const QuizQuestion& q = r.questions[0];
  EXPECT_EQ(q.options[1].feedback, "the same class");
  EXPECT_TRUE(q.options[1].also_correct);
  EXPECT_TRUE(q.accepts("B"));
  EXPECT_TRUE(q.accepts("C"));
  EXPECT_FALSE(q.accepts("A"));
  EXPECT_FALSE(q.accepts("Z"));
  EXPECT_EQ(q.correct, "C") << "the canonical answer stays the file's";
}

TEST(QuizValidation, AlsoCorrectIsCheckedAndNeedsItsReason) {
  std::string p = problem_of(withOptionB(json{{"text", "two"}, {"also_correct", true}}));
  EXPECT_NE(p.find("'also_correct' needs a \"feedback\""), std::string::npos) << p;
  p = problem_of(withOptionB(json{{"text", "two"}, {"feedback", "why"}, {"also_correct", "yes"}}));
  EXPECT_NE(p.find("'also_correct' must be true or false"), std::string::npos) << p;
  p = problem_of(withOptionB(json{{"text", "two"}, {"feedbak", "why"}}));
  EXPECT_NE(p.find("unknown field 'feedbak'"), std::string::npos) << p;
  json q = withOptionB(json{{"text", "two"}, {"feedback", "why"}, {"also_correct", true}});
  q["correct"] = "B";
  p = problem_of(q);
  EXPECT_NE(p.find("'also_correct' is for other options"), std::string::npos) << p;
}

}  // namespace
}  // namespace dpv::course
