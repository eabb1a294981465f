#include "gui/quiz/page.h"

#include <QDir>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QStackedWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <memory>
#include <utility>

#include "engine/error.h"
#include "engine/model_spec.h"
#include "gui/common/context.h"
#include "gui/quiz/option_button.h"
#include "gui/quiz/text.h"

using dpv::course::QuizQuestion;
using dpv::course::ScenarioResult;

namespace gui {

namespace {

// The Iteration page's settings for a question's scenario (course::scenario_setup): what the
// scenario does not name stays as it is.
AppSettings settingsOfScenario(const dpv::course::QuizScenario& scenario, AppSettings settings) {
  const dpv::course::ScenarioSetup setup = dpv::course::scenario_setup(scenario);
  if (setup.devices > 0) settings.devices = QStringLiteral("cpu:%1").arg(setup.devices);
  if (setup.batch > 0) settings.batchSize = setup.batch;
  if (!setup.preset.empty()) settings.preset = QString::fromStdString(setup.preset);
  if (setup.sync_bn) settings.syncBatchNorm = *setup.sync_bn;
  return settings;
}

}  // namespace

QuizPage::QuizPage(AppContext* context, QWidget* parent) : Page(context, parent) {
  buildUi();
  addKeys();
  loadCourse();
  startRound({});
  resumeSavedAnswers();
}

// A scenario run in progress is waited for by its runner (a child of the page) as the page goes.
QuizPage::~QuizPage() = default;

QString QuizPage::progressPath() const {
  return QString::fromStdString(dpv::course::progress_path(context()->dataDir().toStdString()));
}

void QuizPage::loadCourse() {
  const QString quizDir = QDir(context()->lessonsDir()).filePath(QStringLiteral("quiz"));
  dpv::course::QuizLoadResult loaded = dpv::course::load_quiz(quizDir.toStdString());
  questions_ = std::move(loaded.questions);
  for (const auto& p : loaded.problems) problems_ << QString::fromStdString(p);
  for (int i = 0; i < static_cast<int>(questions_.size()); ++i) byId_.insert(QString::fromStdString(questions_[i].id), i);
  const dpv::course::ProgressLoad saved = dpv::course::load_progress(progressPath().toStdString());
  progress_ = saved.progress;
  if (!saved.message.empty()) {
    problems_ << QString::fromStdString(saved.message);
    // Once the main window has given the page its id, so the message waits for the Quiz page.
    QTimer::singleShot(0, this, [this, message = QString::fromStdString(saved.message)] { showStatus(message); });
  }
  banner_->setVisible(!problems_.isEmpty());
  banner_->setText(quiz_text::problemsBanner(problems_));
}

void QuizPage::startRound(const QStringList& ids) {
  sequence_.clear();
  if (ids.isEmpty()) {
    for (const auto& q : questions_) sequence_ << QString::fromStdString(q.id);
  } else {
    sequence_ = ids;
  }
  roundAnswers_.clear();
  index_ = 0;
  if (sequence_.isEmpty()) {
    showSummary();
    return;
  }
  showQuestion();
}

QString QuizPage::currentSection() const {
  const QuizQuestion* q = currentQuestion();
  return q && !isSummaryShown() ? QString::fromStdString(q->section) : QString();
}

void QuizPage::goToSection(const QString& section) {
  for (int i = 0; i < sequence_.size(); ++i) {
    auto it = byId_.find(sequence_[i]);
    if (it != byId_.end() && questions_[static_cast<size_t>(*it)].section == section.toStdString()) {
      goToQuestion(i);
      return;
    }
  }
  // None in this round (a retry round without that section's questions): stay, and say so.
  if (auto* button = sectionButtons_.value(section)) button->setChecked(section == currentSection());
  showStatus(tr("This round has no %1 question.").arg(
      QString::fromStdString(dpv::course::quiz_section_title(section.toStdString()))));
}

const QuizQuestion* QuizPage::currentQuestion() const {
  if (index_ < 0 || index_ >= sequence_.size()) return nullptr;
  auto it = byId_.find(sequence_[index_]);
  return it == byId_.end() ? nullptr : &questions_[static_cast<size_t>(*it)];
}

QString QuizPage::currentQuestionId() const {
  const QuizQuestion* q = currentQuestion();
  return q ? QString::fromStdString(q->id) : QString();
}

bool QuizPage::isSummaryShown() const { return stack_->currentWidget() == summaryPage_; }
bool QuizPage::isAnswered() const { return roundAnswers_.contains(currentQuestionId()); }
bool QuizPage::hintVisible() const { return !hint_->isHidden(); }
bool QuizPage::solutionVisible() const { return !solution_->isHidden(); }
QString QuizPage::feedbackText() const { return feedback_->isHidden() ? QString() : feedback_->text(); }
QString QuizPage::solutionText() const { return solution_->isHidden() ? QString() : solution_->text(); }
QString QuizPage::summaryText() const { return summary_->text(); }
QString QuizPage::scenarioText() const { return scenarioOutput_->isHidden() ? QString() : scenarioOutput_->text(); }

QuizOptionButton* QuizPage::optionButton(const QString& label) const {
  for (auto* b : optionButtons_)
    if (b->label() == label) return b;
  return nullptr;
}

void QuizPage::updateHeader() {
  counter_->setText(quiz_text::counter(index_, static_cast<int>(sequence_.size()), retryRound_, progress_.score(),
                                       static_cast<int>(questions_.size())));
}

void QuizPage::showQuestion() {
  const QuizQuestion* q = currentQuestion();
  if (!q) {
    showSummary();
    return;
  }
  stack_->setCurrentWidget(questionScroll_);
  difficulty_->setText(quiz_text::difficultyLine(*q));
  for (auto it = sectionButtons_.cbegin(); it != sectionButtons_.cend(); ++it)
    it.value()->setChecked(it.key().toStdString() == q->section);
  prompt_->setText(QString::fromStdString(q->prompt));
  code_->setVisible(!q->code.empty());
  code_->setPlainText(QString::fromStdString(q->code));
  if (!q->code.empty()) {
    // Tall enough for every line: sized from the font, not in fixed pixels.
    const int lines = code_->document()->blockCount();
    const QFontMetrics fm(code_->font());
    code_->setFixedHeight(fm.lineSpacing() * lines + 2 * static_cast<int>(code_->document()->documentMargin()) +
                          2 * code_->frameWidth());
  }
  qDeleteAll(optionButtons_);
  optionButtons_.clear();
  selected_.clear();
  for (const auto& o : q->options) {
    auto* b = new QuizOptionButton(QString::fromStdString(o.label), QString::fromStdString(o.text),
                                   questionScroll_->widget());
    connect(b, &QPushButton::clicked, this, [this, label = b->label()] { selectOption(label); });
    optionsLayout_->addWidget(b);
    optionButtons_ << b;
  }
  hint_->setText(tr("Hint: %1").arg(QString::fromStdString(q->hint)));
  hint_->hide();
  hintButton_->show();
  feedback_->hide();
  solution_->hide();
  scenarioBox_->setVisible(q->scenario.has_value());
  checkButton_->show();
  checkButton_->setEnabled(false);
  // The engine's result gives the answer away, so it runs once the learner has chosen.
  runButton_->setEnabled(false);
  scenarioStatus_->setText(tr("Answer first; then the engine runs this question's code on simulated devices."));
  scenarioOutput_->hide();
  if (auto it = scenarioResults_.find(QString::fromStdString(q->id)); it != scenarioResults_.end()) setScenarioText(*it);
  linkButton_->setVisible(!q->link.empty());
  linkButton_->setText(quiz_text::linkText(QString::fromStdString(q->link)));
  prevButton_->setEnabled(index_ > 0);
  nextButton_->setEnabled(true);
  nextButton_->setText(index_ + 1 < sequence_.size() ? tr("Next (Enter)") : tr("Finish (Enter)"));
  if (auto it = roundAnswers_.find(QString::fromStdString(q->id)); it != roundAnswers_.end()) showAnsweredState(*it);
  updateHeader();
  questionScroll_->ensureVisible(0, 0);
}

bool QuizPage::chooseOption(const QString& label) {
  const QuizQuestion* q = currentQuestion();
  if (!q || isSummaryShown() || isAnswered() || !q->option(label.toStdString())) return false;
  answer(label, /*record=*/true);
  return true;
}

bool QuizPage::selectOption(const QString& label) {
  const QuizQuestion* q = currentQuestion();
  if (!q || isSummaryShown() || isAnswered() || !q->option(label.toStdString())) return false;
  selected_ = label;
  for (auto* b : optionButtons_)
    b->setState(b->label() == label ? QuizOptionButton::State::Selected : QuizOptionButton::State::Plain);
  checkButton_->setEnabled(true);
  return true;
}

bool QuizPage::confirmSelection() {
  if (selected_.isEmpty()) return false;
  return chooseOption(std::exchange(selected_, QString()));
}

void QuizPage::resumeSavedAnswers() {
  // What the learner answered before (another run of the app) stays answered: shown and locked.
  int firstOpen = -1;
  for (int i = 0; i < sequence_.size(); ++i) {
    if (const auto* saved = progress_.find(sequence_[i].toStdString())) {
      roundAnswers_.insert(sequence_[i], QString::fromStdString(saved->chosen));
    } else if (firstOpen < 0) {
      firstOpen = i;
    }
  }
  if (roundAnswers_.isEmpty()) return;
  if (firstOpen < 0) {
    showSummary();  // every question is answered
    return;
  }
  goToQuestion(firstOpen);
}

void QuizPage::openLink() {
  const QuizQuestion* q = currentQuestion();
  if (!q || q->link.empty()) return;
  const QString page = QString::fromStdString(q->link);
  if (page == QLatin1String("iteration")) {
    AppSettings wanted = q->scenario ? settingsOfScenario(*q->scenario, context()->settings()) : context()->settings();
    // The question's section decides the mode: a DataParallel question opens in DataParallel
    // whatever mode the page was left in.
    wanted.strategy = q->section == "ddp" ? dpv::StrategyKind::DistributedDataParallel : dpv::StrategyKind::DataParallel;
    if (!(wanted == context()->settings())) {
      context()->setSettings(wanted);
      // Said on the page that shows them.
      emit context()->statusMessage(page, tr("Settings of the question: %1 on %2").arg(wanted.batchSize).arg(wanted.devices));
    }
  }
  // The BatchNorm lab has controls of its own (not the settings bar's): it takes the question's
  // devices and batch from a request of its own.
  if (page == QLatin1String("bnlab") && q->scenario) {
    const dpv::course::ScenarioSetup setup = dpv::course::scenario_setup(*q->scenario);
    const int devices = setup.devices, batch = setup.batch;
    if (devices > 0 && batch > 0) {
      emit context()->labSettingsRequested(devices, batch);
      emit context()->statusMessage(page, tr("Settings of the question: a batch of %1 on %2 devices").arg(batch).arg(devices));
    }
  }
  emit context()->navigateRequested(page);
}

void QuizPage::answer(const QString& label, bool record) {
  const QuizQuestion* q = currentQuestion();
  const QString id = QString::fromStdString(q->id);
  const bool correct = q->accepts(label.toStdString());  // the answer, or an option that works too
  roundAnswers_.insert(id, label);
  if (record) {
    progress_.record(q->id, label.toStdString(), correct);
    saveProgress();
  }
  showAnsweredState(label);
  updateHeader();
  if (record) emit answered(id, correct);
}

void QuizPage::showAnsweredState(const QString& chosen) {
  const QuizQuestion* q = currentQuestion();
  const QString correctLabel = QString::fromStdString(q->correct);
  for (auto* b : optionButtons_) {
    if (b->label() == correctLabel) b->setState(QuizOptionButton::State::Correct);
    else if (b->label() == chosen)
      b->setState(q->accepts(chosen.toStdString()) ? QuizOptionButton::State::Correct : QuizOptionButton::State::Wrong);
    else b->setState(QuizOptionButton::State::Dimmed);
  }
  const bool right = q->accepts(chosen.toStdString());
  feedback_->setText(quiz_text::feedback(*q, chosen));
  feedback_->setStyleSheet(quiz_text::feedbackStyle(right));
  feedback_->show();
  solution_->setText(quiz_text::solutionHtml(*q));
  solution_->show();
  hint_->hide();
  hintButton_->hide();  // the solution says more than the hint now
  checkButton_->hide();
  runButton_->setEnabled(!runner_->busy());
  if (!scenarioResults_.contains(QString::fromStdString(q->id)))
    scenarioStatus_->setText(tr("The engine runs this question's code on simulated devices."));
  // A result shown before answering held back which option it matches; show it now.
  if (auto it = scenarioResults_.find(QString::fromStdString(q->id)); it != scenarioResults_.end()) setScenarioText(*it);
}

void QuizPage::saveProgress() {
  try {
    dpv::course::save_progress(progressPath().toStdString(), progress_);
  } catch (const dpv::Error& e) {
    showStatus(tr("Quiz progress could not be saved: %1").arg(QString::fromUtf8(e.what())));
  }
}

void QuizPage::showHint() {
  if (!currentQuestion() || isSummaryShown() || isAnswered()) return;
  hint_->show();
}

void QuizPage::next() {
  if (isSummaryShown()) return;
  if (index_ + 1 >= sequence_.size()) {
    showSummary();
    return;
  }
  ++index_;
  showQuestion();
}

void QuizPage::previous() {
  if (isSummaryShown()) {
    if (sequence_.isEmpty()) return;
    index_ = static_cast<int>(sequence_.size()) - 1;
    showQuestion();
    return;
  }
  if (index_ == 0) return;
  --index_;
  showQuestion();
}

void QuizPage::goToQuestion(int index) {
  if (index < 0 || index >= sequence_.size()) return;
  index_ = index;
  showQuestion();
}

void QuizPage::showSummary() {
  std::vector<std::string> order;
  for (const auto& q : questions_) order.push_back(q.id);
  const auto missed = progress_.missed_ids(order);
  QStringList missedPrompts;
  for (const auto& id : missed)
    if (auto it = byId_.find(QString::fromStdString(id)); it != byId_.end())
      missedPrompts << QString::fromStdString(questions_[static_cast<size_t>(*it)].prompt);
  int roundRight = 0;
  for (auto it = roundAnswers_.cbegin(); it != roundAnswers_.cend(); ++it)
    if (auto q = byId_.find(it.key()); q != byId_.end() && questions_[static_cast<size_t>(*q)].accepts(it.value().toStdString()))
      ++roundRight;
  QStringList sectionScores;
  for (const auto& section : dpv::course::quiz_sections()) {
    int count = 0, right = 0;
    for (const auto& q : questions_) {
      if (q.section != section) continue;
      ++count;
      const auto answer = progress_.answers().find(q.id);
      if (answer != progress_.answers().end() && answer->second.correct) ++right;
    }
    if (count) sectionScores << quiz_text::sectionScore(QString::fromStdString(dpv::course::quiz_section_title(section)), right, count);
  }
  summary_->setText(quiz_text::summaryHtml(roundRight, static_cast<int>(roundAnswers_.size()),
                                           static_cast<int>(sequence_.size()), progress_.score(),
                                           static_cast<int>(questions_.size()), missedPrompts, sectionScores));
  for (auto* button : std::as_const(sectionButtons_)) button->setChecked(false);
  retryButton_->setEnabled(!missed.empty());
  stack_->setCurrentWidget(summaryPage_);
  prevButton_->setEnabled(!sequence_.isEmpty());
  nextButton_->setEnabled(false);
  counter_->setText(tr("Summary"));
}

void QuizPage::retryMissed() {
  std::vector<std::string> order;
  for (const auto& q : questions_) order.push_back(q.id);
  QStringList ids;
  for (const auto& id : progress_.missed_ids(order))
    if (byId_.contains(QString::fromStdString(id))) ids << QString::fromStdString(id);
  if (ids.isEmpty()) return;
  retryRound_ = true;
  startRound(ids);
}

void QuizPage::restartAll() {
  retryRound_ = false;
  startRound({});
}

void QuizPage::resetProgress() {
  progress_.clear();
  saveProgress();
  scenarioResults_.clear();
  results_.next();  // a run still under way belongs to the old progress
  restartAll();
  showStatus(tr("Quiz progress was reset."));
}

void QuizPage::runScenario() {
  const QuizQuestion* q = currentQuestion();
  if (!q || !q->scenario || runner_->busy() || !isAnswered()) return;
  const QuizQuestion question = *q;  // the worker gets its own copy
  const QString id = QString::fromStdString(q->id);
  const quint64 generation = results_.current();
  runButton_->setEnabled(false);
  scenarioStatus_->setText(tr("Running on the engine..."));
  runner_->run([question] { return dpv::course::run_question_scenario(question); },  // never throws
               [this, id, generation](const ScenarioResult& result) {
                 runButton_->setEnabled(isAnswered());
                 onScenarioResult(generation, id, result);
               });
}

void QuizPage::onScenarioResult(quint64 generation, const QString& questionId, const ScenarioResult& result) {
  if (!results_.isCurrent(generation)) return;  // the progress was reset while it ran
  scenarioResults_.insert(questionId, result);
  if (currentQuestionId() == questionId && !isSummaryShown()) setScenarioText(result);
  emit scenarioFinished(questionId);
}

void QuizPage::setScenarioText(const ScenarioResult& result) {
  scenarioStatus_->setText(QString::fromStdString(result.title));
  scenarioOutput_->setText(quiz_text::scenarioPlainText(result, isAnswered()));
  scenarioOutput_->show();
}

QList<Page::Shot> QuizPage::screenshots() {
  // Preview answers (record = false) so rendering screenshots never changes saved progress.
  const auto showCodeQuestion = [this] {
    restartAll();
    for (int i = 0; i < sequence_.size(); ++i)
      if (const auto it = byId_.find(sequence_[i]); it != byId_.end() && !questions_[static_cast<size_t>(*it)].code.empty()) {
        goToQuestion(i);
        break;
      }
  };
  QList<Shot> shots;
  shots << Shot{QString(), [showCodeQuestion](std::function<void()> done) {
                  showCodeQuestion();
                  done();
                }};
  // Answers the current question wrongly and waits for the engine's result so the shot shows it.
  const auto answerAndRun = [this](std::function<void()> done) {
    const QuizQuestion* q = currentQuestion();
    if (!q) return done();
    answer(q->correct == "A" ? QStringLiteral("B") : QStringLiteral("A"), /*record=*/false);
    if (!q->scenario || runner_->busy()) return done();
    // Give up after a while.
    auto once = std::make_shared<std::function<void()>>(std::move(done));
    auto finish = [once] {
      if (*once) std::exchange(*once, nullptr)();
    };
    auto conn = std::make_shared<QMetaObject::Connection>();
    *conn = connect(this, &QuizPage::scenarioFinished, this, [finish, conn] {
      disconnect(*conn);
      finish();
    });
    QTimer::singleShot(20000, this, finish);
    runScenario();
  };
  shots << Shot{QStringLiteral("answered"), [showCodeQuestion, answerAndRun](std::function<void()> done) {
                  showCodeQuestion();
                  answerAndRun(std::move(done));
                }};
  // The DDP section: its first question, answered, with the engine's DDP run.
  shots << Shot{QStringLiteral("ddp"), [this, answerAndRun](std::function<void()> done) {
                  restartAll();
                  goToSection(QStringLiteral("ddp"));
                  answerAndRun(std::move(done));
                }};
  shots << Shot{QStringLiteral("summary"), [this](std::function<void()> done) {
                  showSummary();
                  done();
                }};
  return shots;
}

}  // namespace gui
