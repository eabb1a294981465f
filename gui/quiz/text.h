#pragma once
// The quiz page's texts: feedback, worked solution, summary, scenario output. Kept apart from the
// widgets so the wording is in one place (and the page file stays about layout and behaviour).
#include <QString>
#include <QStringList>

#include "course/quiz.h"
#include "course/scenario.h"

namespace gui {

namespace quiz_text {

QString problemsBanner(const QStringList& problems);
QString counter(int index, int count, bool retryRound, int score, int total);
QString difficultyLine(const dpv::course::QuizQuestion& q);
QString linkText(const QString& pageId);
QString feedback(const dpv::course::QuizQuestion& q, const QString& chosen);
// Translucent mid-tone fills: readable on light and dark palettes alike.
QString feedbackStyle(bool correct);
QString solutionHtml(const dpv::course::QuizQuestion& q);
// "DistributedDataParallel: 3 of 16 correct"
QString sectionScore(const QString& sectionTitle, int right, int count);
QString summaryHtml(int roundRight, int roundAnswered, int roundCount, int score, int total, const QStringList& missedPrompts,
                    const QStringList& sectionScores = {});
// The result's lines and facts; the line naming the matching option only once the question is answered.
QString scenarioPlainText(const dpv::course::ScenarioResult& r, bool answered);

}  // namespace quiz_text

}  // namespace gui
