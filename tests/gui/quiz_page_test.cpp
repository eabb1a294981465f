// The quiz page, offscreen: answering right and wrong, feedback, hint, solution, "Run it" on a
// worker thread, links, the summary with "Retry missed", saved progress, a corrupt progress file,
// and the screenshot states. The test binary's main creates the QApplication.
#include <gtest/gtest.h>

#include <QApplication>
#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QKeyEvent>
#include <QPushButton>
#include <QTemporaryDir>
#include <functional>
#include <memory>

#include "course/progress.h"
#include "gui_test_support.h"
#include "gui/common/context.h"
#include "gui/quiz/option_button.h"
#include "gui/bnlab/page.h"
#include "gui/quiz/page.h"

namespace gui {

namespace {

void pressKey(QWidget* w, int key, const QString& text = {}) {
  QKeyEvent press(QEvent::KeyPress, key, Qt::NoModifier, text);
  QCoreApplication::sendEvent(w, &press);
}

class QuizPageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dataDir_.isValid());
    qputenv("DPVIZ_DATA_DIR", dataDir_.path().toUtf8());
    qputenv("DPVIZ_LESSONS", QByteArray(DPV_LESSONS_SOURCE_DIR));
    context_ = std::make_unique<AppContext>();
    page_ = std::make_unique<QuizPage>(context_.get());
    page_->resize(1280, 800);
  }
  void TearDown() override {
    page_.reset();
    context_.reset();
    qunsetenv("DPVIZ_DATA_DIR");
    qunsetenv("DPVIZ_LESSONS");
  }
  std::string progressFile() const { return dpv::course::progress_path(dataDir_.path().toStdString()); }
  dpv::course::Progress savedProgress() const { return dpv::course::load_progress(progressFile()).progress; }
  // Goes to a question by id in the current round.
  void goTo(const QString& id) {
    for (int i = 0; i < page_->questionCount(); ++i) {
      page_->goToQuestion(i);
      if (page_->currentQuestionId() == id) return;
    }
    FAIL() << "no question " << id.toStdString();
  }
  QString wrongLabel() const {
    const auto* q = page_->currentQuestion();
    return q->correct == "A" ? QStringLiteral("B") : QStringLiteral("A");
  }

  QTemporaryDir dataDir_;
  std::unique_ptr<AppContext> context_;
  std::unique_ptr<QuizPage> page_;
};

TEST_F(QuizPageTest, StartsAtTheFirstDocumentQuestionWithoutProblems) {
  EXPECT_TRUE(page_->problems().isEmpty()) << page_->problems().join("\n").toStdString();
  EXPECT_GE(page_->questionCount(), 15);
  EXPECT_EQ(page_->currentQuestionId(), QStringLiteral("doc-1-purpose"));
  EXPECT_FALSE(page_->isAnswered());
  EXPECT_TRUE(page_->feedbackText().isEmpty());
  EXPECT_FALSE(page_->solutionVisible());
  ASSERT_NE(page_->optionButton("D"), nullptr);
  EXPECT_EQ(page_->optionButton("E"), nullptr);
}

TEST_F(QuizPageTest, SectionButtonsJumpToTheDdpQuestionsAndTheSummaryScoresEachSection) {
  ASSERT_NE(page_->sectionButton("dp"), nullptr);
  ASSERT_NE(page_->sectionButton("ddp"), nullptr);
  EXPECT_EQ(page_->currentSection(), QStringLiteral("dp"));
  EXPECT_TRUE(page_->sectionButton("dp")->isChecked());
  EXPECT_FALSE(page_->sectionButton("ddp")->isChecked());

  page_->sectionButton("ddp")->click();
  const auto* q = page_->currentQuestion();
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->section, "ddp");
  EXPECT_TRUE(page_->sectionButton("ddp")->isChecked());
  EXPECT_FALSE(page_->sectionButton("dp")->isChecked());
  // The first DDP question follows the last DataParallel one.
  const int first = page_->currentIndex();
  ASSERT_GT(first, 0);
  page_->goToQuestion(first - 1);
  EXPECT_EQ(page_->currentSection(), QStringLiteral("dp"));
  page_->goToQuestion(first);

  // Answer it right: the summary counts it in the DDP section only.
  ASSERT_TRUE(page_->chooseOption(QString::fromStdString(page_->currentQuestion()->correct)));
  int ddpCount = 0, dpCount = 0;
  for (int i = 0; i < page_->questionCount(); ++i) {
    page_->goToQuestion(i);
    (page_->currentSection() == QStringLiteral("ddp") ? ddpCount : dpCount)++;
  }
  EXPECT_GE(ddpCount, 12);
  page_->showSummary();
  const QString summary = page_->summaryText();
  EXPECT_TRUE(summary.contains(QStringLiteral("DistributedDataParallel: 1 of %1 correct").arg(ddpCount))) << summary.toStdString();
  EXPECT_TRUE(summary.contains(QStringLiteral("DataParallel: 0 of %1 correct").arg(dpCount))) << summary.toStdString();
  EXPECT_TRUE(page_->currentSection().isEmpty());
}

TEST_F(QuizPageTest, DdpQuestionRunsOnTheEnginesRanksAndMatchesTheMarkedAnswer) {
  page_->goToSection(QStringLiteral("ddp"));
  const auto* q = page_->currentQuestion();
  ASSERT_NE(q, nullptr);
  ASSERT_TRUE(q->scenario.has_value());
  ASSERT_TRUE(page_->chooseOption(QString::fromStdString(q->correct)));
  page_->runScenario();
  ASSERT_TRUE(waitUntil([this] { return !page_->scenarioRunning() && !page_->scenarioText().isEmpty(); }, 20000));
  // The page shows what the engine computed, and the option the engine's result matches.
  const auto expected = dpv::course::run_question_scenario(*q);
  ASSERT_FALSE(expected.failed);
  EXPECT_EQ(expected.answer_label, q->correct);
  for (const auto& line : expected.lines)
    EXPECT_TRUE(page_->scenarioText().contains(QString::fromStdString(line))) << line;
}

TEST_F(QuizPageTest, HintThenRightAnswerByKeyboardIsSaved) {
  pressKey(page_.get(), Qt::Key_H, "h");
  EXPECT_TRUE(page_->hintVisible());
  pressKey(page_.get(), Qt::Key_2, "2");  // B: the document's answer to question 1
  EXPECT_FALSE(page_->isAnswered()) << "a key selects; Enter checks";
  EXPECT_EQ(page_->selectedOption(), QStringLiteral("B"));
  pressKey(page_.get(), Qt::Key_Return);
  ASSERT_TRUE(page_->isAnswered());
  EXPECT_TRUE(page_->feedbackText().startsWith("Correct")) << page_->feedbackText().toStdString();
  EXPECT_TRUE(page_->solutionVisible());
  EXPECT_FALSE(page_->hintVisible());
  EXPECT_EQ(page_->optionButton("B")->state(), QuizOptionButton::State::Correct);
  EXPECT_EQ(page_->optionButton("A")->state(), QuizOptionButton::State::Dimmed);
  const auto saved = savedProgress();
  ASSERT_NE(saved.find("doc-1-purpose"), nullptr);
  EXPECT_EQ(saved.find("doc-1-purpose")->chosen, "B");
  EXPECT_TRUE(saved.find("doc-1-purpose")->correct);
  pressKey(page_.get(), Qt::Key_Return);
  EXPECT_EQ(page_->currentQuestionId(), QStringLiteral("doc-2-wrap"));
}

TEST_F(QuizPageTest, WrongAnswerShowsTheSolutionAndCannotBeChanged) {
  page_->next();
  ASSERT_EQ(page_->currentQuestionId(), QStringLiteral("doc-2-wrap"));
  pressKey(page_.get(), Qt::Key_A, "a");  // the answer is C
  pressKey(page_.get(), Qt::Key_Enter);
  EXPECT_TRUE(page_->feedbackText().startsWith("Not quite")) << page_->feedbackText().toStdString();
  EXPECT_TRUE(page_->feedbackText().contains("The answer is C"));
  EXPECT_EQ(page_->optionButton("A")->state(), QuizOptionButton::State::Wrong);
  EXPECT_EQ(page_->optionButton("C")->state(), QuizOptionButton::State::Correct);
  const QString solution = page_->solutionText();
  EXPECT_TRUE(solution.contains("Worked solution"));
  EXPECT_TRUE(solution.contains("Quick check"));
  EXPECT_TRUE(solution.contains("Common mistakes"));
  EXPECT_TRUE(solution.contains("torch.nn.DataParallel"));
  EXPECT_FALSE(page_->chooseOption("C"));  // one answer per question and round
  EXPECT_FALSE(savedProgress().find("doc-2-wrap")->correct);
  page_->showHint();
  EXPECT_FALSE(page_->hintVisible());  // no hint after answering
}

TEST_F(QuizPageTest, RunItShowsTheEnginesResultOnAWorkerThread) {
  goTo("doc-3-output-shape");
  // The engine's output (torch.Size([8, 10])) is the answer: it runs only once the learner chose.
  EXPECT_FALSE(page_->runButton()->isEnabled());
  page_->runScenario();
  EXPECT_FALSE(page_->scenarioRunning());
  EXPECT_TRUE(page_->scenarioText().isEmpty());
  page_->chooseOption("A");
  EXPECT_TRUE(page_->runButton()->isEnabled());
  QString finishedId;
  QObject::connect(page_.get(), &QuizPage::scenarioFinished, [&](const QString& id) { finishedId = id; });
  page_->runButton()->click();
  EXPECT_TRUE(page_->scenarioRunning());
  ASSERT_TRUE(waitUntil([&] { return !finishedId.isEmpty(); }, 30000));
  EXPECT_EQ(finishedId, QStringLiteral("doc-3-output-shape"));
  const QString text = page_->scenarioText();
  EXPECT_TRUE(text.contains("torch.Size([8, 10])")) << text.toStdString();
  EXPECT_TRUE(text.contains("chunks: 4, 4")) << text.toStdString();
  EXPECT_TRUE(text.contains("matches option A")) << text.toStdString();
  ASSERT_TRUE(waitUntil([&] { return !page_->scenarioRunning(); }, 30000));
}

TEST_F(QuizPageTest, AStrayKeyOrClickSelectsButDoesNotAnswer) {
  pressKey(page_.get(), Qt::Key_C, "c");
  EXPECT_FALSE(page_->isAnswered());
  EXPECT_EQ(savedProgress().find("doc-1-purpose"), nullptr) << "nothing saved for a key alone";
  EXPECT_EQ(page_->optionButton("C")->state(), QuizOptionButton::State::Selected);
  page_->optionButton("B")->click();  // changing one's mind is free until checked
  EXPECT_FALSE(page_->isAnswered());
  EXPECT_EQ(page_->selectedOption(), QStringLiteral("B"));
  EXPECT_EQ(page_->optionButton("C")->state(), QuizOptionButton::State::Plain);
  ASSERT_TRUE(page_->checkButton()->isEnabled());
  page_->checkButton()->click();
  ASSERT_TRUE(page_->isAnswered());
  EXPECT_EQ(savedProgress().find("doc-1-purpose")->chosen, "B");
  pressKey(page_.get(), Qt::Key_A, "a");  // after checking, keys change nothing
  EXPECT_EQ(savedProgress().find("doc-1-purpose")->chosen, "B");
  EXPECT_EQ(page_->optionButton("B")->state(), QuizOptionButton::State::Correct);
}

TEST_F(QuizPageTest, AfterARestartSavedAnswersAreShownLockedAndItOpensAtTheFirstUnanswered) {
  ASSERT_TRUE(page_->chooseOption("B"));  // right
  page_->next();
  ASSERT_TRUE(page_->chooseOption("A"));  // wrong (C)
  page_ = std::make_unique<QuizPage>(context_.get());  // the app again
  EXPECT_EQ(page_->currentIndex(), 2) << "opens at the first question not answered";
  EXPECT_FALSE(page_->isAnswered());
  page_->goToQuestion(1);
  ASSERT_TRUE(page_->isAnswered()) << "the saved answer is shown";
  EXPECT_TRUE(page_->feedbackText().contains("The answer is C")) << page_->feedbackText().toStdString();
  EXPECT_EQ(page_->optionButton("A")->state(), QuizOptionButton::State::Wrong);
  EXPECT_FALSE(page_->chooseOption("C")) << "and cannot be overwritten";
  EXPECT_FALSE(savedProgress().find("doc-2-wrap")->correct);
  EXPECT_EQ(page_->progress().score(), 1);
}

TEST_F(QuizPageTest, SeeItOnTheIterationPageAppliesTheQuestionsSettings) {
  context_->setSettings(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("mlp-bn"), 32));
  QStringList requested;
  QObject::connect(context_.get(), &AppContext::navigateRequested, [&](const QString& id) { requested << id; });
  goTo("scatter-6-on-4-idle");
  ASSERT_TRUE(page_->chooseOption("A"));
  ASSERT_TRUE(page_->linkButton()->isVisible() || page_->linkButton()->isVisibleTo(page_.get()));
  page_->linkButton()->click();
  EXPECT_EQ(requested, QStringList{QStringLiteral("iteration")});
  EXPECT_EQ(context_->settings().devices, QStringLiteral("cpu:4"));
  EXPECT_EQ(context_->settings().batchSize, 6);
  goTo("doc-3-output-shape");  // its batch is the first dimension of its input
  page_->linkButton()->click();
  EXPECT_EQ(context_->settings().devices, QStringLiteral("cpu:2"));
  EXPECT_EQ(context_->settings().batchSize, 8);
}

TEST_F(QuizPageTest, SeeItOnTheIterationPageOpensInTheQuestionsMode) {
  AppSettings ddp = settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 8);
  ddp.strategy = dpv::StrategyKind::DistributedDataParallel;  // the page was left in DDP mode
  context_->setSettings(ddp);
  goTo("scatter-6-on-4-idle");  // a DataParallel question
  ASSERT_EQ(page_->currentQuestion()->section, "dp");
  page_->linkButton()->click();
  EXPECT_EQ(context_->settings().strategy, dpv::StrategyKind::DataParallel) << "a DataParallel question opens the page in DataParallel mode";
}

TEST_F(QuizPageTest, TheSameClassSpelledFromItsModuleCountsAsRightWithANote) {
  goTo("doc-2-wrap");
  ASSERT_TRUE(page_->chooseOption("B"));  // torch.nn.parallel.DataParallel: the same class as C
  EXPECT_TRUE(page_->feedbackText().startsWith("Correct too")) << page_->feedbackText().toStdString();
  EXPECT_TRUE(page_->feedbackText().contains("This works too")) << "the option's own note: " << page_->feedbackText().toStdString();
  EXPECT_TRUE(page_->feedbackText().contains("The question's answer is C")) << page_->feedbackText().toStdString();
  EXPECT_EQ(page_->optionButton("B")->state(), QuizOptionButton::State::Correct);
  EXPECT_EQ(page_->optionButton("C")->state(), QuizOptionButton::State::Correct);
  ASSERT_NE(savedProgress().find("doc-2-wrap"), nullptr);
  EXPECT_TRUE(savedProgress().find("doc-2-wrap")->correct);
}

TEST_F(QuizPageTest, OpenTheBatchNormLabCarriesTheQuestionsSettingsIntoTheLab) {
  const AppSettings before = settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 10);
  context_->setSettings(before);
  BatchNormLabPage lab(context_.get());
  ASSERT_EQ(lab.config().batchSize, BnLabConfig{}.batchSize);
  QStringList requested;
  QObject::connect(context_.get(), &AppContext::navigateRequested, [&](const QString& id) { requested << id; });
  goTo("doc-5-batchnorm");  // 2 devices, a batch of 8
  ASSERT_TRUE(page_->chooseOption("A"));
  page_->linkButton()->click();
  EXPECT_EQ(requested, QStringList{QStringLiteral("bnlab")});
  EXPECT_EQ(lab.config().devices, "cpu:2");
  EXPECT_EQ(lab.config().batchSize, 8);
  goTo("bn-one-sample-chunk");  // 4 devices, a batch of 10: one device gets a single sample
  page_->linkButton()->click();
  EXPECT_EQ(lab.config().devices, "cpu:4");
  EXPECT_EQ(lab.config().batchSize, 10);
  EXPECT_EQ(lab.config().learningRate, BnLabConfig{}.learningRate) << "the lab's other controls stay";
  EXPECT_TRUE(context_->settings() == before) << "the settings bar is not the lab's";
}

TEST_F(QuizPageTest, LinkButtonsAskTheWindowToNavigate) {
  QStringList requested;
  QObject::connect(context_.get(), &AppContext::navigateRequested, [&](const QString& id) { requested << id; });
  for (const char* id : {"doc-1-purpose", "doc-2-wrap", "doc-5-batchnorm"}) {
    goTo(id);
    for (auto* b : page_->findChildren<QPushButton*>())
      if (b->isVisibleTo(page_.get()) && (b->text().startsWith("See it") || b->text().startsWith("Open the") || b->text().startsWith("Run the")))
        b->click();
  }
  EXPECT_EQ(requested, (QStringList{"iteration", "sample", "bnlab"}));
}

TEST_F(QuizPageTest, SummaryScoresTheRoundAndRetriesOnlyMissed) {
  const int count = page_->questionCount();
  QStringList missed;
  for (int i = 0; i < count; ++i) {
    const auto* q = page_->currentQuestion();
    const bool answerWrong = i % 3 == 1;
    const QString label = answerWrong ? wrongLabel() : QString::fromStdString(q->correct);
    if (answerWrong) missed << QString::fromStdString(q->id);
    ASSERT_TRUE(page_->chooseOption(label));
    page_->next();
  }
  ASSERT_TRUE(page_->isSummaryShown());
  const QString summary = page_->summaryText();
  const int right = count - static_cast<int>(missed.size());
  EXPECT_TRUE(summary.contains(QString("Score: %1 of %2").arg(right).arg(count))) << summary.toStdString();
  EXPECT_TRUE(summary.contains(QString("This round: %1 correct out of %2").arg(right).arg(count))) << summary.toStdString();
  EXPECT_EQ(savedProgress().score(), right);
  page_->previous();  // back from the summary to the last question, and forward again
  EXPECT_FALSE(page_->isSummaryShown());
  EXPECT_TRUE(page_->isAnswered());
  pressKey(page_.get(), Qt::Key_Enter);
  EXPECT_TRUE(page_->isSummaryShown());
  page_->retryMissed();
  ASSERT_FALSE(page_->isSummaryShown());
  EXPECT_EQ(page_->questionCount(), missed.size());
  EXPECT_EQ(page_->currentQuestionId(), missed.front());
  EXPECT_FALSE(page_->isAnswered());  // a fresh round
  ASSERT_TRUE(page_->chooseOption(QString::fromStdString(page_->currentQuestion()->correct)));
  EXPECT_EQ(savedProgress().score(), right + 1);
}

TEST_F(QuizPageTest, ProgressSurvivesANewPageAndResetClearsIt) {
  page_->chooseOption("B");
  page_->next();
  page_->chooseOption("A");
  page_ = std::make_unique<QuizPage>(context_.get());
  EXPECT_EQ(page_->progress().answered(), 2);
  EXPECT_EQ(page_->progress().score(), 1);
  page_->resetProgress();
  EXPECT_EQ(page_->progress().answered(), 0);
  EXPECT_EQ(savedProgress().answered(), 0);
  EXPECT_EQ(page_->currentIndex(), 0);
}

TEST_F(QuizPageTest, CorruptProgressIsMovedAsideAndReported) {
  page_.reset();
  {
    QFile f(QString::fromStdString(progressFile()));
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write("{ not json");
  }
  QStringList status, pages;
  QObject::connect(context_.get(), &AppContext::statusMessage, [&](const QString& page, const QString& m) {
    pages << page;
    status << m;
  });
  page_ = std::make_unique<QuizPage>(context_.get());
  page_->setPageId(QStringLiteral("quiz"));  // as the main window does right after constructing it
  ASSERT_EQ(page_->problems().size(), 1);
  EXPECT_TRUE(page_->problems().front().contains("corrupt")) << page_->problems().front().toStdString();
  EXPECT_TRUE(waitUntil([&] { return !status.isEmpty(); }, 2000));
  EXPECT_EQ(pages, QStringList{QStringLiteral("quiz")}) << "the message is the Quiz page's, shown when it is";
  const QStringList aside = QDir(dataDir_.path()).entryList({"progress.json.corrupt-*"});
  EXPECT_EQ(aside.size(), 1);
  EXPECT_TRUE(page_->chooseOption("B"));  // and the quiz still works and saves
  EXPECT_EQ(savedProgress().score(), 1);
}

TEST_F(QuizPageTest, SurvivesProgressFilesOfWrongTypesOrHugeNumbers) {
  // These once threw a JSON library exception out of the page's constructor.
  for (const char* bytes : {"{\"format\": 1}", "1e999", "{\"format\": \"dpviz-quiz-progress\", \"answers\": [1e999]}"}) {
    SCOPED_TRACE(bytes);
    page_.reset();
    for (const QString& f : QDir(dataDir_.path()).entryList({"progress.json*"})) QFile::remove(dataDir_.filePath(f));
    {
      QFile f(QString::fromStdString(progressFile()));
      ASSERT_TRUE(f.open(QIODevice::WriteOnly));
      f.write(bytes);
    }
    ASSERT_NO_THROW(page_ = std::make_unique<QuizPage>(context_.get()));
    ASSERT_EQ(page_->problems().size(), 1);
    EXPECT_TRUE(page_->problems().front().contains("corrupt")) << page_->problems().front().toStdString();
    EXPECT_TRUE(page_->chooseOption("B"));
  }
}

TEST_F(QuizPageTest, SurvivesAQuizFileWithANumberPastDouble) {
  // A copy of the course with one extra quiz file holding 1e400: that file is a problem, the rest loads.
  QTemporaryDir lessons;
  ASSERT_TRUE(lessons.isValid());
  const QDir source(QStringLiteral(DPV_LESSONS_SOURCE_DIR));
  ASSERT_TRUE(QFile::copy(source.filePath("intro.md"), lessons.filePath("intro.md")));
  ASSERT_TRUE(QDir(lessons.path()).mkpath("quiz"));
  for (const QString& f : QDir(source.filePath("quiz")).entryList({"*.json"}))
    ASSERT_TRUE(QFile::copy(source.filePath("quiz/" + f), lessons.filePath("quiz/" + f)));
  {
    QFile f(lessons.filePath("quiz/99-huge.json"));
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write("{\"id\": \"huge\", \"comment\": 1e400}");
  }
  page_.reset();
  context_.reset();
  qputenv("DPVIZ_LESSONS", lessons.path().toUtf8());
  context_ = std::make_unique<AppContext>();
  const int questions = QuizPage(context_.get()).questionCount();
  ASSERT_NO_THROW(page_ = std::make_unique<QuizPage>(context_.get()));
  EXPECT_GT(questions, 0);
  ASSERT_EQ(page_->problems().size(), 1);
  EXPECT_TRUE(page_->problems().front().contains("99-huge.json")) << page_->problems().front().toStdString();
}

TEST_F(QuizPageTest, ScreenshotStatesAreReachedWithoutTouchingProgress) {
  page_->chooseOption("B");
  const auto before = savedProgress().to_json();
  const auto shots = page_->screenshots();
  ASSERT_EQ(shots.size(), 4);
  EXPECT_EQ(shots[0].suffix, QString());
  EXPECT_EQ(shots[1].suffix, QStringLiteral("answered"));
  EXPECT_EQ(shots[2].suffix, QStringLiteral("ddp"));
  EXPECT_EQ(shots[3].suffix, QStringLiteral("summary"));
  for (const auto& shot : shots) {
    bool done = false;
    shot.prepare([&] { done = true; });
    ASSERT_TRUE(waitUntil([&] { return done; }, 30000)) << shot.suffix.toStdString();
    if (shot.suffix.isEmpty()) {
      EXPECT_FALSE(page_->isSummaryShown());
      EXPECT_FALSE(page_->isAnswered());
    } else if (shot.suffix == "answered" || shot.suffix == "ddp") {
      EXPECT_TRUE(page_->feedbackText().startsWith("Not quite"));
      EXPECT_TRUE(page_->solutionVisible());
      EXPECT_EQ(page_->currentSection(), shot.suffix == "ddp" ? QStringLiteral("ddp") : QStringLiteral("dp"));
      EXPECT_FALSE(page_->scenarioText().isEmpty()) << "the shot shows the engine's run";
    } else {
      EXPECT_TRUE(page_->isSummaryShown());
    }
  }
  EXPECT_EQ(savedProgress().to_json(), before);
}

TEST_F(QuizPageTest, LayoutFitsCommonWindowSizes) {
  goTo("doc-3-output-shape");
  page_->chooseOption("B");
  for (const QSize size : {QSize(1280, 800), QSize(1920, 1080), QSize(900, 600)}) {
    page_->resize(size);
    page_->show();
    QCoreApplication::processEvents();
    for (auto* b : page_->findChildren<QuizOptionButton*>()) {
      EXPECT_LE(b->width(), size.width());
      EXPECT_GE(b->height(), b->heightForWidth(b->width()) - 1) << "option text clipped at " << size.width();
    }
  }
  page_->hide();
}

}  // namespace

}  // namespace gui
