// The quiz page's widgets and keys: the header with the section buttons, the question view (prompt,
// code, options, feedback, hint, solution, the engine's scenario, the link), the summary view and
// the navigation.
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QStackedWidget>
#include <QVBoxLayout>

#include "gui/quiz/page.h"

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

}  // namespace

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
  stack_->addWidget(buildQuestionView());
  stack_->addWidget(buildSummaryView());

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

QWidget* QuizPage::buildQuestionView() {
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

  column->addWidget(buildScenarioBox(body));

  auto* linkRow = new QHBoxLayout;
  linkButton_ = plainButton(QString(), body);
  linkRow->addWidget(linkButton_);
  linkRow->addStretch(1);
  column->addLayout(linkRow);
  column->addStretch(1);
  questionScroll_->setWidget(body);
  return questionScroll_;
}

QWidget* QuizPage::buildScenarioBox(QWidget* body) {
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
  return scenarioBox_;
}

QWidget* QuizPage::buildSummaryView() {
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

  return summaryPage_;
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

}  // namespace gui
