// The quiz page's texts (gui/quiz/text.h) decide from the question's and the result's values:
// the origin's enum, the index of the sentence that names the matching option.
#include <gtest/gtest.h>

#include "gui/quiz/text.h"

namespace gui {
namespace {

TEST(QuizText, TheOriginNamesTheSourceDocumentOnlyForItsQuestions) {
  dpv::course::QuizQuestion question;
  question.difficulty = "easy";
  question.section = "dp";
  question.origin = dpv::course::QuizOrigin::Document;
  EXPECT_TRUE(quiz_text::difficultyLine(question).endsWith(QLatin1String("from the source document")))
      << quiz_text::difficultyLine(question).toStdString();
  question.origin = dpv::course::QuizOrigin::Dpviz;
  EXPECT_TRUE(quiz_text::difficultyLine(question).endsWith(QLatin1String("dpviz question")))
      << quiz_text::difficultyLine(question).toStdString();
}

TEST(QuizText, TheLineNamingTheOptionWaitsForTheAnswer) {
  dpv::course::ScenarioResult r;
  r.lines = {"chunks of 4 and 4", "The engine's result matches option A.", "output on device 0"};
  r.answer_label = "A";
  r.answer_line = 1;
  const QString before = quiz_text::scenarioPlainText(r, false);
  EXPECT_FALSE(before.contains(QLatin1String("matches option A"))) << before.toStdString();
  EXPECT_TRUE(before.contains(QLatin1String("chunks of 4 and 4\noutput on device 0"))) << before.toStdString();
  EXPECT_TRUE(quiz_text::scenarioPlainText(r, true).contains(QLatin1String("matches option A")));
  // Only the marked line is held back, whatever its words.
  r.answer_line = 0;
  EXPECT_FALSE(quiz_text::scenarioPlainText(r, false).contains(QLatin1String("chunks of 4")));
  EXPECT_TRUE(quiz_text::scenarioPlainText(r, false).contains(QLatin1String("matches option A")));
}

}  // namespace
}  // namespace gui
