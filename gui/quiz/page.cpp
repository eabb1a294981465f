#include "gui/quiz/page.h"

#include <QDir>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
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

QLabel* wrappedLabel(QWidget* parent, const QString& objectName = {}) {
  auto* label = new QLabel(parent);
  label->setWordWrap(true);
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  if (!objectName.isEmpty()) label->setObjectName(objectName);
  return label;
}

QPushButton* plainButton(const QString& text, QWidget* parent) {
  auto* b = new QPushButton(text, parent);
  b->setAutoDefault(false);
  return b;
}

// The Iteration page's settings for a question's scenario: its devices ("devices": K simulated
// GPUs), batch ("batch", or the first dimension of "input_shape"), model ("preset") and BatchNorm
// mode ("sync_bn"); what the scenario does not name stays as it is.
QJsonObject scenarioParams(const dpv::course::QuizScenario& scenario) {
  return QJsonDocument::fromJson(QByteArray::fromStdString(scenario.params_json)).object();
}
int scenarioDevices(const QJsonObject& params) {  // 0 when the scenario names none (or too many)
  const int devices = params.value(QLatin1String("devices")).toInt();
  return devices >= 1 && devices <= 8 ? devices : 0;
}
int scenarioBatch(const QJsonObject& params) {  // 0 when the scenario names none
  int batch = params.value(QLatin1String("batch")).toInt();
  if (batch < 1) batch = params.value(QLatin1String("input_shape")).toArray().at(0).toInt();
  return std::max(batch, 0);
}

AppSettings settingsOfScenario(const dpv::course::QuizScenario& scenario, AppSettings settings) {
  const QJsonObject params = scenarioParams(scenario);
  if (const int devices = scenarioDevices(params)) settings.devices = QStringLiteral("cpu:%1").arg(devices);
  if (const int batch = scenarioBatch(params)) settings.batchSize = batch;
  const std::string preset = params.value(QLatin1String("preset")).toString().toStdString();
  const auto presets = dpv::preset_names();
  if (std::find(presets.begin(), presets.end(), preset) != presets.end()) settings.preset = QString::fromStdString(preset);
  if (params.contains(QLatin1String("sync_bn"))) settings.syncBatchNorm = params.value(QLatin1String("sync_bn")).toBool();
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

void QuizPage::buildUi() {
  setFocusPolicy(Qt::StrongFocus);
  auto* outer = new QVBoxLayout(this);

  auto* header = new QHBoxLayout;
  title_ = new QLabel(tr("Practice quiz"), this);
  title_->setObjectName(QStringLiteral("pageTitle"));
  counter_ = new QLabel(this);
  counter_->setObjectName(QStringLiteral("hintLabel"));
  header->addWidget(title_);
  header->addStretch(1);
  // One button per section: it jumps to the section's first question and stays down while a
  // question of that section is shown.
  for (const auto& section : dpv::course::quiz_sections()) {
    const QString id = QString::fromStdString(section);
    auto* button = new QPushButton(QString::fromStdString(dpv::course::quiz_section_title(section)), this);
    button->setObjectName(QStringLiteral("quizSection-") + id);
    button->setCheckable(true);
    button->setFocusPolicy(Qt::NoFocus);  // the page keeps the keyboard (1-6, Enter, H)
    button->setToolTip(tr("Go to the first %1 question").arg(button->text()));
    connect(button, &QPushButton::clicked, this, [this, id] { goToSection(id); });
    header->addWidget(button);
    sectionButtons_.insert(id, button);
  }
  header->addWidget(counter_);
  outer->addLayout(header);

  banner_ = wrappedLabel(this, QStringLiteral("errorBanner"));
  banner_->hide();
  outer->addWidget(banner_);

  stack_ = new QStackedWidget(this);
  outer->addWidget(stack_, 1);

  // --- The question view, in a scroll area so long solutions never squeeze the layout.
  questionScroll_ = new QScrollArea(stack_);
  questionScroll_->setWidgetResizable(true);
  questionScroll_->setFrameShape(QFrame::NoFrame);
  auto* body = new QWidget(questionScroll_);
  auto* column = new QVBoxLayout(body);
  const int gap = fontMetrics().height() / 2;
  column->setSpacing(gap);

  difficulty_ = new QLabel(body);
  difficulty_->setObjectName(QStringLiteral("hintLabel"));
  prompt_ = wrappedLabel(body, QStringLiteral("quizPrompt"));
  QFont promptFont = prompt_->font();
  promptFont.setPointSizeF(promptFont.pointSizeF() * 1.15);
  prompt_->setFont(promptFont);
  code_ = new QPlainTextEdit(body);
  code_->setObjectName(QStringLiteral("quizCode"));
  code_->setReadOnly(true);
  code_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  code_->setLineWrapMode(QPlainTextEdit::NoWrap);
  code_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  code_->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  column->addWidget(difficulty_);
  column->addWidget(prompt_);
  column->addWidget(code_);

  optionsLayout_ = new QVBoxLayout;
  optionsLayout_->setSpacing(gap);
  column->addLayout(optionsLayout_);

  auto* checkRow = new QHBoxLayout;
  checkButton_ = plainButton(tr("Check answer (Enter)"), body);
  checkButton_->setObjectName(QStringLiteral("primary"));
  checkButton_->setToolTip(tr("Answers with the selected option; an answer cannot be changed in this round"));
  checkRow->addWidget(checkButton_);
  checkRow->addStretch(1);
  column->addLayout(checkRow);

  feedback_ = wrappedLabel(body, QStringLiteral("quizFeedback"));
  feedback_->hide();
  column->addWidget(feedback_);

  auto* hintRow = new QHBoxLayout;
  hintButton_ = plainButton(tr("Hint (H)"), body);
  hintRow->addWidget(hintButton_);
  hintRow->addStretch(1);
  column->addLayout(hintRow);
  hint_ = wrappedLabel(body, QStringLiteral("hintLabel"));
  hint_->hide();
  column->addWidget(hint_);

  solution_ = wrappedLabel(body, QStringLiteral("quizSolution"));
  solution_->setTextFormat(Qt::RichText);
  solution_->hide();
  column->addWidget(solution_);

  scenarioBox_ = new QWidget(body);
  auto* scenarioLayout = new QVBoxLayout(scenarioBox_);
  scenarioLayout->setContentsMargins(0, 0, 0, 0);
  auto* runRow = new QHBoxLayout;
  runButton_ = plainButton(tr("Run it on the engine"), scenarioBox_);
  runButton_->setObjectName(QStringLiteral("primary"));
  scenarioStatus_ = wrappedLabel(scenarioBox_, QStringLiteral("hintLabel"));
  runRow->addWidget(runButton_);
  runRow->addWidget(scenarioStatus_, 1);
  scenarioLayout->addLayout(runRow);
  scenarioOutput_ = wrappedLabel(scenarioBox_, QStringLiteral("quizScenarioOutput"));
  scenarioOutput_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  scenarioOutput_->setTextFormat(Qt::PlainText);
  scenarioOutput_->setStyleSheet(QStringLiteral("QLabel { background-color: palette(base); border: 1px solid palette(mid);"
                                                " border-radius: 4px; padding: 6px; }"));
  scenarioOutput_->hide();
  scenarioLayout->addWidget(scenarioOutput_);
  column->addWidget(scenarioBox_);

  auto* linkRow = new QHBoxLayout;
  linkButton_ = plainButton(QString(), body);
  linkRow->addWidget(linkButton_);
  linkRow->addStretch(1);
  column->addLayout(linkRow);
  column->addStretch(1);
  questionScroll_->setWidget(body);
  stack_->addWidget(questionScroll_);

  // --- The summary view.
  summaryPage_ = new QWidget(stack_);
  auto* summaryLayout = new QVBoxLayout(summaryPage_);
  summary_ = wrappedLabel(summaryPage_, QStringLiteral("quizSummary"));
  summary_->setTextFormat(Qt::RichText);
  auto* summaryScroll = new QScrollArea(summaryPage_);
  summaryScroll->setWidgetResizable(true);
  summaryScroll->setFrameShape(QFrame::NoFrame);
  summaryScroll->setWidget(summary_);
  summary_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  summaryLayout->addWidget(summaryScroll, 1);
  auto* summaryButtons = new QHBoxLayout;
  retryButton_ = plainButton(tr("Retry missed"), summaryPage_);
  retryButton_->setObjectName(QStringLiteral("primary"));
  restartButton_ = plainButton(tr("Start over"), summaryPage_);
  summaryButtons->addWidget(retryButton_);
  summaryButtons->addWidget(restartButton_);
  summaryButtons->addStretch(1);
  summaryLayout->addLayout(summaryButtons);
  stack_->addWidget(summaryPage_);

  // --- Navigation.
  auto* nav = new QHBoxLayout;
  prevButton_ = plainButton(tr("Previous"), this);
  nextButton_ = plainButton(tr("Next (Enter)"), this);
  nav->addWidget(prevButton_);
  nav->addStretch(1);
  nav->addWidget(nextButton_);
  outer->addLayout(nav);

  connect(hintButton_, &QPushButton::clicked, this, &QuizPage::showHint);
  connect(runButton_, &QPushButton::clicked, this, &QuizPage::runScenario);
  connect(prevButton_, &QPushButton::clicked, this, &QuizPage::previous);
  connect(nextButton_, &QPushButton::clicked, this, &QuizPage::next);
  connect(retryButton_, &QPushButton::clicked, this, &QuizPage::retryMissed);
  connect(restartButton_, &QPushButton::clicked, this, &QuizPage::restartAll);
  connect(checkButton_, &QPushButton::clicked, this, &QuizPage::confirmSelection);
  connect(linkButton_, &QPushButton::clicked, this, &QuizPage::openLink);
}

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
  if (page == QLatin1String("iteration") && q->scenario) {
    const AppSettings wanted = settingsOfScenario(*q->scenario, context()->settings());
    if (!(wanted == context()->settings())) {
      context()->setSettings(wanted);
      // Said on the page that shows them.
      emit context()->statusMessage(page, tr("Settings of the question: %1 on %2").arg(wanted.batchSize).arg(wanted.devices));
    }
  }
  // The BatchNorm lab has controls of its own (not the settings bar's): it takes the question's
  // devices and batch from a request of its own.
  if (page == QLatin1String("bnlab") && q->scenario) {
    const QJsonObject params = scenarioParams(*q->scenario);
    const int devices = scenarioDevices(params), batch = scenarioBatch(params);
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
  const bool correct = label.toStdString() == q->correct;
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
    else if (b->label() == chosen) b->setState(QuizOptionButton::State::Wrong);
    else b->setState(QuizOptionButton::State::Dimmed);
  }
  const bool right = chosen == correctLabel;
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
    if (auto q = byId_.find(it.key()); q != byId_.end() && questions_[static_cast<size_t>(*q)].correct == it.value().toStdString())
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

void QuizPage::addKeys() {
  // Select first, then confirm: a stray key only marks an option, Enter answers for good.
  QList<QKeyCombination> letters, digits;
  for (int i = 0; i < 6; ++i) {
    letters << QKeyCombination(static_cast<Qt::Key>(Qt::Key_A + i));
    digits << QKeyCombination(static_cast<Qt::Key>(Qt::Key_1 + i));
  }
  const auto select = [this](int which) { selectOption(dpv::course::option_label(which).c_str()); };
  addKey(letters, tr("select answer A-F (Enter confirms it)"), select);
  addKey(digits, tr("select answer 1-6 = A-F (Enter confirms it)"), select);
  addKey({QKeyCombination(Qt::Key_Return), QKeyCombination(Qt::Key_Enter)},
         tr("confirm the selected answer; with none selected, the next question"), [this](int) {
           if (!confirmSelection()) next();
         });
  addKey({QKeyCombination(Qt::Key_H)}, tr("show the hint"), [this](int) { showHint(); });
  addKey({QKeyCombination(Qt::Key_Left), QKeyCombination(Qt::Key_Backspace)}, tr("previous question"),
         [this](int) { previous(); });
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
