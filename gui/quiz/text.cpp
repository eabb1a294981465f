#include "gui/quiz/text.h"

#include <QCoreApplication>

namespace gui {

namespace quiz_text {
namespace {

QString tr(const char* text) { return QCoreApplication::translate("QuizPage", text); }
QString q(const std::string& s) { return QString::fromStdString(s); }
QString esc(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }

}  // namespace

QString problemsBanner(const QStringList& problems) {
  if (problems.isEmpty()) return {};
  QString text = tr("Some course files have problems; the rest of the quiz works:");
  for (const QString& p : problems) text += QStringLiteral("\n• ") + p;
  return text;
}

QString counter(int index, int count, bool retryRound, int score, int total) {
  const QString round = retryRound ? tr("Retry: question %1 of %2") : tr("Question %1 of %2");
  return round.arg(index + 1).arg(count) + QStringLiteral("   ·   ") + tr("Score %1 / %2").arg(score).arg(total);
}

QString difficultyLine(const dpv::course::QuizQuestion& question) {
  QString d = q(question.difficulty);
  if (!d.isEmpty()) d[0] = d[0].toUpper();
  const QString origin = question.origin == dpv::course::QuizOrigin::Document ? tr("from the source document") : tr("dpviz question");
  return q(dpv::course::quiz_section_title(question.section)) + QStringLiteral("  ·  ") + d + QStringLiteral("  ·  ") + origin;
}

QString linkText(const QString& pageId) {
  if (pageId == QLatin1String("iteration")) return tr("See it on the Iteration page");
  if (pageId == QLatin1String("bnlab")) return tr("Open the BatchNorm lab");
  if (pageId == QLatin1String("sample")) return tr("Run the document's sample program");
  return tr("Open %1").arg(pageId);
}

QString feedback(const dpv::course::QuizQuestion& question, const QString& chosen) {
  const auto* right = question.option(question.correct);
  const auto* picked = question.option(chosen.toStdString());
  // The chosen option's own note (why it works too, or where it goes wrong), after the verdict.
  const QString note = picked && !picked->feedback.empty() ? QStringLiteral(" ") + q(picked->feedback) : QString();
  if (chosen.toStdString() == question.correct) return tr("Correct: %1. %2").arg(q(question.correct), q(right->text)) + note;
  if (question.accepts(chosen.toStdString()))
    return tr("Correct too: you chose %1.%2 The question's answer is %3. %4").arg(chosen, note, q(question.correct), q(right->text));
  return tr("Not quite: you chose %1. The answer is %2. %3").arg(chosen, q(question.correct), q(right->text)) + note;
}

QString feedbackStyle(bool correct) {
  const QString rgb = correct ? QStringLiteral("46, 160, 67") : QStringLiteral("218, 54, 51");
  return QStringLiteral("QLabel { background-color: rgba(%1, 0.20); border: 1px solid rgba(%1, 0.9);"
                        " border-radius: 6px; padding: 8px; font-weight: 600; }")
      .arg(rgb);
}

QString solutionHtml(const dpv::course::QuizQuestion& question) {
  QString html = QStringLiteral("<p><b>%1</b></p><ol>").arg(tr("Worked solution"));
  for (const auto& step : question.solution) html += QStringLiteral("<li>%1</li>").arg(esc(step));
  html += QStringLiteral("</ol><p><b>%1</b> %2</p>").arg(tr("Quick check:"), esc(question.quick_check));
  html += QStringLiteral("<p><b>%1</b></p><ul>").arg(tr("Common mistakes"));
  for (const auto& m : question.mistakes) html += QStringLiteral("<li>%1</li>").arg(esc(m));
  html += QStringLiteral("</ul>");
  return html;
}

QString sectionScore(const QString& sectionTitle, int right, int count) {
  return tr("%1: %2 of %3 correct").arg(sectionTitle).arg(right).arg(count);
}

QString summaryHtml(int roundRight, int roundAnswered, int roundCount, int score, int total, const QStringList& missedPrompts,
                    const QStringList& sectionScores) {
  QString html = QStringLiteral("<h2>%1</h2>").arg(tr("Summary"));
  html += QStringLiteral("<p>%1</p>")
              .arg(tr("This round: %1 correct out of %2 questions (%3 answered).").arg(roundRight).arg(roundCount).arg(roundAnswered));
  html += QStringLiteral("<p><b>%1</b></p>").arg(tr("Score: %1 of %2 questions answered correctly.").arg(score).arg(total));
  if (!sectionScores.isEmpty()) {
    html += QStringLiteral("<ul>");
    for (const QString& line : sectionScores) html += QStringLiteral("<li>%1</li>").arg(line.toHtmlEscaped());
    html += QStringLiteral("</ul>");
  }
  if (missedPrompts.isEmpty()) {
    html += QStringLiteral("<p>%1</p>").arg(tr("Nothing missed so far."));
  } else {
    html += QStringLiteral("<p>%1</p><ul>").arg(tr("Missed (their last answer was wrong):"));
    for (const QString& p : missedPrompts) html += QStringLiteral("<li>%1</li>").arg(p.toHtmlEscaped());
    html += QStringLiteral("</ul>");
  }
  return html;
}

QString scenarioPlainText(const dpv::course::ScenarioResult& r, bool answered) {
  QStringList lines;
  for (int i = 0; i < static_cast<int>(r.lines.size()); ++i) {
    if (!answered && i == r.answer_line) continue;  // it would give the answer away
    lines << q(r.lines[static_cast<size_t>(i)]);
  }
  if (!answered && !r.answer_label.empty()) lines << tr("(Answer the question to see which option this result matches.)");
  if (!r.facts.empty()) {
    lines << QString();
    for (const auto& [k, v] : r.facts) lines << q(k) + QStringLiteral(": ") + q(v);
  }
  return lines.join(QLatin1Char('\n'));
}

}  // namespace quiz_text

}  // namespace gui
