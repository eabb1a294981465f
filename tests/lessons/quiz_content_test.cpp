// The shipped course: every quiz file loads and validates, the document's five questions are
// there with their answers, and every lesson the pages read exists and has the expected shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "course_test_util.h"
#include "course/lessons.h"
#include "course/quiz.h"
#include "engine/observer.h"

namespace dpv::course {
namespace {

using testing::lessons_dir;
using testing::word_count;
using testing::quiz_dir;

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

TEST(QuizContent, EveryQuizFileLoadsWithoutProblems) {
  const QuizLoadResult quiz = load_quiz(quiz_dir());
  EXPECT_TRUE(quiz.problems.empty()) << joined(quiz.problems);
  EXPECT_GE(quiz.questions.size(), 15u);
  std::set<std::string> ids;
  for (const auto& q : quiz.questions) EXPECT_TRUE(ids.insert(q.id).second) << "duplicate id " << q.id;
}

TEST(QuizContent, DocumentQuestionsHaveTheDocumentsAnswers) {
  const QuizLoadResult quiz = load_quiz(quiz_dir());
  std::vector<const QuizQuestion*> doc;
  for (const auto& q : quiz.questions)
    if (q.origin == QuizOrigin::Document) doc.push_back(&q);
  ASSERT_EQ(doc.size(), 5u);
  // The source document's order and answers: B, C, A, D, A; each with four options.
  const std::vector<std::string> answers = {"B", "C", "A", "D", "A"};
  const std::vector<std::string> key_phrases = {"main purpose of torch.nn.DataParallel", "correct way to wrap",
                                                "output shape of output", "likely cause of this error",
                                                "batch normalization layer"};
  const std::vector<std::string> correct_texts = {
      "To run a model on multiple GPUs by splitting input data automatically",
      "model = torch.nn.DataParallel(model)", "torch.Size([8, 10])",
      "Input tensor dtype does not match model parameters dtype",
      "BatchNorm layers behave differently in DataParallel; use SyncBatchNorm or move to DistributedDataParallel"};
  for (size_t i = 0; i < doc.size(); ++i) {
    SCOPED_TRACE(doc[i]->id);
    EXPECT_NE(doc[i]->prompt.find(key_phrases[i]), std::string::npos);
    EXPECT_EQ(doc[i]->options.size(), 4u);
    EXPECT_EQ(doc[i]->correct, answers[i]);
    ASSERT_NE(doc[i]->option(doc[i]->correct), nullptr);
    EXPECT_EQ(doc[i]->option(doc[i]->correct)->text, correct_texts[i]);
  }
  EXPECT_EQ(doc[0]->link, "iteration");
  EXPECT_EQ(doc[1]->link, "sample");
  EXPECT_EQ(doc[4]->link, "bnlab");
  EXPECT_TRUE(doc[2]->scenario && doc[2]->scenario->type == "output_shape");
  EXPECT_TRUE(doc[3]->scenario && doc[3]->scenario->type == "dtype_mismatch");
  EXPECT_TRUE(doc[4]->scenario && doc[4]->scenario->type == "batchnorm");
  EXPECT_FALSE(doc[2]->code.empty());
}

TEST(QuizContent, OwnQuestionsAreEngineChecked) {
  const QuizLoadResult quiz = load_quiz(quiz_dir());
  int own_with_scenario = 0;
  for (const auto& q : quiz.questions) {
    if (q.origin == QuizOrigin::Document) continue;
    EXPECT_TRUE(q.scenario.has_value()) << q.id << " has no scenario the engine can check";
    if (q.scenario) ++own_with_scenario;
  }
  EXPECT_GE(own_with_scenario, 10);
}

TEST(QuizContent, EveryQuestionIsComplete) {
  const QuizLoadResult quiz = load_quiz(quiz_dir());
  std::map<std::string, int> by_difficulty;
  for (const auto& q : quiz.questions) {
    SCOPED_TRACE(q.id);
    ++by_difficulty[q.difficulty];
    EXPECT_GE(q.options.size(), 2u);
    EXPECT_LE(q.options.size(), 6u);
    EXPECT_GE(q.correct_index(), 0);
    EXPECT_GE(q.solution.size(), 2u);
    EXPECT_FALSE(q.hint.empty());
    EXPECT_FALSE(q.quick_check.empty());
    EXPECT_GE(q.mistakes.size(), 2u);
    // A hint must not simply name the answer.
    EXPECT_EQ(q.hint.find(q.option(q.correct)->text), std::string::npos);
  }
  EXPECT_GT(by_difficulty["easy"], 0);
  EXPECT_GT(by_difficulty["medium"], 0);
  EXPECT_GT(by_difficulty["hard"], 0);
}

TEST(LessonContent, EveryLessonLoads) {
  EXPECT_TRUE(check_lessons(lessons_dir()).empty()) << joined(check_lessons(lessons_dir()));
  EXPECT_EQ(lesson_ids().size(), 17u + ddp_stage_lesson_names().size() + zero_stage_lesson_names().size() +
                                     zero_topic_lesson_names().size() + network_lesson_names().size());
  EXPECT_NE(std::find(lesson_ids().begin(), lesson_ids().end(), "ddp/faults"), lesson_ids().end());
}

// The stage lessons are templates: their length as the learner reads them (rendered with a run's
// facts) is checked for every run in lesson_facts_test.cpp.
TEST(LessonContent, StageLessonsAreComplete) {
  for (const auto& name : stage_lesson_names()) {
    SCOPED_TRACE(name);
    const std::string text = load_lesson(lessons_dir(), "stages/" + name);
    for (const char* part : {"**What happens.**", "**Why.**", "**Watch in the animation.**", "**PyTorch source.**",
                             "**Common misconceptions.**"})
      EXPECT_NE(text.find(part), std::string::npos) << "missing " << part;
  }
}

TEST(LessonContent, DdpTopicLessonsCoverWhatLearnersGetWrong) {
  for (const auto& name : ddp_topic_lesson_names()) {
    SCOPED_TRACE(name);
    const std::string text = load_lesson(lessons_dir(), "ddp/" + name);
    // ddp/sampler and ddp/buckets are templates, measured rendered in lesson_facts_test.cpp;
    // ddp/faults is one too, rendered from fault runs in faults_lesson_test.cpp.
    if (name != "sampler" && name != "buckets" && name != "faults") {
      EXPECT_GE(word_count(text), 200);
      EXPECT_LE(word_count(text), 450);
    }
    EXPECT_NE(text.find("**Common misconceptions.**"), std::string::npos);
  }
  const std::string sampler = load_lesson(lessons_dir(), "ddp/sampler");
  EXPECT_NE(sampler.find("2, 6, 0"), std::string::npos);  // the padded shard of 10 samples on 4 ranks
  EXPECT_NE(sampler.find("**per process**"), std::string::npos);
  const std::string buckets = load_lesson(lessons_dir(), "ddp/buckets");
  EXPECT_NE(buckets.find("**1 MiB**"), std::string::npos);
  EXPECT_NE(buckets.find("**mean**"), std::string::npos);
  EXPECT_NE(load_lesson(lessons_dir(), "ddp/ring").find("2(W − 1)/W"), std::string::npos);
  const std::string compare = load_lesson(lessons_dir(), "ddp/dp-vs-ddp");
  EXPECT_NE(compare.find("rank 0 prints is rank 0's own"), std::string::npos);
  EXPECT_NE(compare.find("SyncBatchNorm works only under DDP"), std::string::npos);
}

TEST(QuizContent, DdpSectionHasTwelveEngineGradedQuestions) {
  const QuizLoadResult quiz = load_quiz(quiz_dir());
  int ddp = 0;
  for (const auto& q : quiz.questions) {
    if (q.section != "ddp") continue;
    ++ddp;
    SCOPED_TRACE(q.id);
    ASSERT_TRUE(q.scenario.has_value());
    // Graded by a run of DDP's ranks (DDP, or ZeRO on them), not by a DataParallel scenario.
    EXPECT_TRUE(q.scenario->type == "sampler" || q.scenario->type.rfind("ddp_", 0) == 0 ||
                q.scenario->type.rfind("zero_", 0) == 0)
        << q.scenario->type;
  }
  EXPECT_GE(ddp, 12);
  EXPECT_GT(static_cast<int>(quiz.questions.size()) - ddp, 0) << "the DataParallel section is still there";
}

TEST(LessonContent, DdpStageLessonsAreCompleteAndNameEveryDdpStage) {
  std::vector<std::string> kinds;
  for (StageKind k : {StageKind::Construct, StageKind::Sample, StageKind::BroadcastBuffers, StageKind::Forward,
                      StageKind::Loss, StageKind::Backward, StageKind::Finalize, StageKind::Step})
    kinds.push_back(stage_kind_name(k));
  EXPECT_EQ(ddp_stage_lesson_names(), kinds);
  for (const auto& name : ddp_stage_lesson_names()) {
    SCOPED_TRACE(name);
    const std::string text = load_lesson(lessons_dir(), "ddp/stages/" + name);
    for (const char* part : {"**What happens.**", "**Why.**", "**Watch in the animation.**", "**PyTorch source.**",
                             "**Common misconceptions.**"})
      EXPECT_NE(text.find(part), std::string::npos) << "missing " << part;
  }
  EXPECT_NE(load_lesson(lessons_dir(), "ddp/stages/sample").find("{{padded_total}}"), std::string::npos);
  EXPECT_NE(load_lesson(lessons_dir(), "ddp/stages/finalize").find("mean"), std::string::npos);
}

TEST(LessonContent, KeyFactsArePresent) {
  const std::string bn = load_lesson(lessons_dir(), "batchnorm-lab");
  EXPECT_NE(bn.find("Only replica 0's running statistics survive"), std::string::npos);
  EXPECT_NE(bn.find("Expected more than 1 value per channel when training"), std::string::npos);
  EXPECT_NE(bn.find("does not support SyncBatchNorm"), std::string::npos);
  EXPECT_NE(bn.find("DDP + SyncBatchNorm"), std::string::npos);
  const std::string timeline = load_lesson(lessons_dir(), "timeline");
  EXPECT_NE(timeline.find("algbw"), std::string::npos);
  EXPECT_NE(timeline.find("busbw"), std::string::npos);
  EXPECT_NE(timeline.find("2(n − 1)/n"), std::string::npos);
  const std::string intro = load_lesson(lessons_dir(), "intro");
  EXPECT_NE(intro.find("DistributedDataParallel"), std::string::npos);
  // The examples follow the learner's settings: the app fills in the engine's chunk sizes.
  EXPECT_NE(load_lesson(lessons_dir(), "stages/scatter").find("ceil(N / k)"), std::string::npos);
  EXPECT_NE(load_lesson(lessons_dir(), "stages/scatter").find("{{chunks}}"), std::string::npos);
  EXPECT_NE(load_lesson(lessons_dir(), "stages/reduce_grads").find("**summed**"), std::string::npos);
}

}  // namespace
}  // namespace dpv::course
