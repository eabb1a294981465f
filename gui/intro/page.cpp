#include "gui/intro/page.h"

#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTextBrowser>
#include <QVBoxLayout>

#include "gui/common/context.h"
#include "gui/common/ui_helpers.h"
#include "gui/common/lesson_panel.h"
#include "gui/runtime/engine_controller.h"

namespace gui {

IntroPage::IntroPage(AppContext* context, QWidget* parent) : Page(context, parent) {
  auto* outer = new QHBoxLayout(this);
  outer->setContentsMargins(12, 12, 12, 12);
  outer->setSpacing(12);

  lesson_ = new QTextBrowser();
  lesson_->setOpenExternalLinks(true);
  outer->addWidget(wrapInCard(tr("Introduction: DataParallel basics"), lesson_, this), 3);

  auto* right = new QWidget(this);
  auto* rl = new QVBoxLayout(right);
  rl->setContentsMargins(0, 0, 0, 0);
  auto* runBox = new QWidget();
  auto* runLayout = new QVBoxLayout(runBox);
  runLayout->setContentsMargins(0, 0, 0, 0);
  auto* explain = new QLabel(tr("The source document's sample program: SimpleModel (Linear(10, 2)) wrapped in "
                                "nn.DataParallel, a batch of 32, CrossEntropyLoss, SGD with lr 0.01, one training "
                                "step. It runs on the engine with the devices chosen above."),
                             runBox);
  explain->setWordWrap(true);
  run_ = new QPushButton(QIcon(QStringLiteral(":/icons/run.svg")), tr("Run the sample program"), runBox);
  run_->setObjectName(QStringLiteral("primary"));
  runHint_ = new QLabel(runBox);
  runHint_->setObjectName(QStringLiteral("hintLabel"));
  output_ = new QPlainTextEdit(runBox);
  output_->setObjectName(QStringLiteral("sampleOutput"));
  output_->setReadOnly(true);
  output_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  output_->setPlaceholderText(tr("What the program prints appears here."));
  auto* buttons = new QHBoxLayout();
  buttons->addWidget(run_);
  buttons->addWidget(runHint_, 1);
  auto* toIteration = new QPushButton(tr("Watch one iteration step by step →"), runBox);
  runLayout->addWidget(explain);
  runLayout->addLayout(buttons);
  runLayout->addWidget(output_, 1);
  runLayout->addWidget(toIteration);
  rl->addWidget(wrapInCard(tr("Try it"), runBox, right));
  outer->addWidget(right, 2);

  connect(run_, &QPushButton::clicked, this, &IntroPage::runSample);
  connect(toIteration, &QPushButton::clicked, this, [this] { emit this->context()->navigateRequested(QStringLiteral("iteration")); });
  auto updateHint = [this] { runHint_->setText(tr("on %1").arg(this->context()->settings().devices)); };
  connect(context, &AppContext::settingsChanged, this, updateHint);
  updateHint();
  if (EngineController* e = context->engine()) {
    connect(e, &EngineController::sampleFinished, this, [this](quint64 id, const QString& text, bool ok) {
      if (id != pendingId_) return;
      pendingId_ = 0;
      run_->setEnabled(true);
      output_->setPlainText(QStringLiteral("$ python sample.py\n") + text);
      emit sampleDone(ok);
    });
  } else {
    run_->setEnabled(false);
    runHint_->setText(tr("the engine is not running"));
  }
  loadLesson();
}

void IntroPage::loadLesson() {
  QString error;
  const QString md = loadLessonMarkdown(context()->lessonsDir(), QStringLiteral("intro"), &error);
  if (md.isEmpty()) {
    lesson_->setMarkdown(tr("## DataParallel basics\n\n> **The introduction text is missing** (%1).\n\n"
                            "Everything else works: run the sample program on the right, or open the **Iteration** page "
                            "to watch one training step of `nn.DataParallel` stage by stage.")
                             .arg(error.toHtmlEscaped()));
    return;
  }
  lesson_->setMarkdown(md);
}

void IntroPage::runSample() {
  EngineController* e = context()->engine();
  if (!e || pendingId_ != 0) return;
  run_->setEnabled(false);
  output_->setPlainText(tr("running on %1 …").arg(context()->settings().devices));
  pendingId_ = e->requestSample(context()->settings());
}

QString IntroPage::sampleOutput() const { return output_->toPlainText(); }

QList<Page::Shot> IntroPage::screenshots() {
  return {Shot{QString(), [this](std::function<void()> done) {
    if (!context()->engine()) return done();
    // Shown after the sample ran, so the picture has its output.
    auto* connection = new QMetaObject::Connection;
    *connection = connect(this, &IntroPage::sampleDone, this, [connection, done](bool) {
      QObject::disconnect(*connection);
      delete connection;
      done();
    });
    runSample();
    if (pendingId_ == 0) {  // could not start
      QObject::disconnect(*connection);
      delete connection;
      done();
    }
  }}};
}

}  // namespace gui
