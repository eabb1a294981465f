#pragma once
// The practice quiz: one question at a time, immediate feedback, a hint, the worked solution,
// "Run it" for questions the engine can show (run on a worker thread), links to other pages,
// a summary with the score and "Retry missed". Progress is saved after every answer.
// Answering takes two steps, so a stray key never answers for good: a click or 1-6 / A-F selects
// an option, "Check answer" or Enter confirms it. Enter = next once answered, H = hint. Answers
// saved earlier are shown (and locked) when the page opens again, at the first unanswered question.
#include <QHash>
#include <QList>
#include <QPointer>
#include <QStringList>

#include "course/progress.h"
#include "course/quiz.h"
#include "course/scenario.h"
#include "gui/common/page.h"
#include "gui/runtime/generation.h"
#include "gui/runtime/run_off_thread.h"

class QLabel;
class QPlainTextEdit;
class QPushButton;
class QScrollArea;
class QStackedWidget;
class QVBoxLayout;

namespace gui {

class QuizOptionButton;

class QuizPage : public Page {
  Q_OBJECT
 public:
  explicit QuizPage(AppContext* context, QWidget* parent = nullptr);
  ~QuizPage() override;

  QList<Shot> screenshots() override;

  // State, for the main window and the tests.
  int questionCount() const { return static_cast<int>(sequence_.size()); }  // in the current round
  int currentIndex() const { return index_; }
  QString currentQuestionId() const;
  const dpv::course::QuizQuestion* currentQuestion() const;
  bool isSummaryShown() const;
  bool isAnswered() const;               // the current question, in this round
  QString selectedOption() const { return selected_; }  // selected, not yet checked ("" when none)
  QPushButton* checkButton() const { return checkButton_; }
  QPushButton* runButton() const { return runButton_; }
  QPushButton* linkButton() const { return linkButton_; }
  bool hintVisible() const;
  bool solutionVisible() const;
  QString feedbackText() const;
  QString solutionText() const;
  QString summaryText() const;
  QString scenarioText() const;
  bool scenarioRunning() const { return runner_->busy(); }
  QStringList problems() const { return problems_; }  // quiz files that did not load, progress trouble
  const dpv::course::Progress& progress() const { return progress_; }
  QuizOptionButton* optionButton(const QString& label) const;
  // Sections of the quiz ("dp", "ddp"): the current question's, and the header's section buttons.
  QString currentSection() const;
  QPushButton* sectionButton(const QString& section) const { return sectionButtons_.value(section); }

 public slots:
  // Forgets every saved answer and starts again at the first question (the main window's menu).
  void resetProgress();
  // Answers the current question as if the option were clicked; false if it was already answered
  // or there is no such option.
  bool chooseOption(const QString& label);
  // Marks an option as the learner's choice without answering (a click, a 1-6 / A-F key); false
  // when answered already or there is no such option.
  bool selectOption(const QString& label);
  // Answers with the selected option ("Check answer", Enter); false when nothing is selected.
  bool confirmSelection();
  void showHint();
  void next();       // the last question leads to the summary
  void previous();
  void goToQuestion(int index);
  void goToSection(const QString& section);  // the first question of that section in this round
  void showSummary();
  void retryMissed();  // a round of the questions answered wrongly
  void restartAll();   // a round of every question
  void runScenario();  // the current question's scenario, on a worker thread (once it is answered)

 signals:
  void answered(const QString& questionId, bool correct);
  void scenarioFinished(const QString& questionId);

 private:
  void addKeys();  // the page's keys (Page::addKey): select, confirm, hint, previous
  // The widgets (page_layout.cpp): the page, the question view with its scenario box, the summary.
  void buildUi();
  QWidget* buildQuestionView();
  QWidget* buildScenarioBox(QWidget* body);
  QWidget* buildSummaryView();
  void loadCourse();
  void showQuestion();
  void showAnsweredState(const QString& chosen);
  void answer(const QString& label, bool record);
  void saveProgress();
  void resumeSavedAnswers();  // the saved answers of this round's questions, shown and locked
  void openLink();            // the question's page, with the question's settings where it has them
  void startRound(const QStringList& ids);
  void updateHeader();
  void onScenarioResult(quint64 generation, const QString& questionId, const dpv::course::ScenarioResult& result);
  void setScenarioText(const dpv::course::ScenarioResult& result);
  QString progressPath() const;

  std::vector<dpv::course::QuizQuestion> questions_;
  QHash<QString, int> byId_;            // question id -> index in questions_
  QStringList sequence_;                // ids of this round, in order
  int index_ = 0;
  QHash<QString, QString> roundAnswers_;  // id -> chosen label, this round
  QHash<QString, dpv::course::ScenarioResult> scenarioResults_;  // id -> last run
  bool retryRound_ = false;
  QString selected_;  // the option selected for the current question, not yet checked
  dpv::course::Progress progress_;
  QStringList problems_;

  OffThreadRunner* runner_ = new OffThreadRunner(this);  // the "run it" scenarios
  Generation results_;  // of the scenario results: a reset of the progress makes runs under way stale

  // Widgets.
  QLabel* title_ = nullptr;
  QLabel* counter_ = nullptr;
  QHash<QString, QPushButton*> sectionButtons_;  // section id -> its header button
  QLabel* banner_ = nullptr;
  QStackedWidget* stack_ = nullptr;
  QScrollArea* questionScroll_ = nullptr;
  QLabel* difficulty_ = nullptr;
  QLabel* prompt_ = nullptr;
  QPlainTextEdit* code_ = nullptr;
  QVBoxLayout* optionsLayout_ = nullptr;
  QList<QuizOptionButton*> optionButtons_;
  QPushButton* checkButton_ = nullptr;
  QLabel* feedback_ = nullptr;
  QPushButton* hintButton_ = nullptr;
  QLabel* hint_ = nullptr;
  QLabel* solution_ = nullptr;
  QWidget* scenarioBox_ = nullptr;
  QPushButton* runButton_ = nullptr;
  QLabel* scenarioStatus_ = nullptr;
  QLabel* scenarioOutput_ = nullptr;
  QPushButton* linkButton_ = nullptr;
  QPushButton* prevButton_ = nullptr;
  QPushButton* nextButton_ = nullptr;
  QWidget* summaryPage_ = nullptr;
  QLabel* summary_ = nullptr;
  QPushButton* retryButton_ = nullptr;
  QPushButton* restartButton_ = nullptr;
};

}  // namespace gui
