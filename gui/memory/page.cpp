#include "gui/memory/page.h"

#include <QComboBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QTableWidget>
#include <QVBoxLayout>

#include "course/run_caption.h"
#include "gui/common/context.h"
#include "gui/common/lesson_panel.h"
#include "gui/common/ui_helpers.h"
#include "gui/memory/charts.h"
#include "gui/memory/fits_panel.h"
#include "gui/runtime/run_spec_from_settings.h"

namespace gui {

namespace {

MemoryWorker::Runner runnerOrDefault(MemoryWorker::Runner runner) {
  if (runner) return runner;
  return [](const dpv::RunSpec& spec) { return dpv::course::compare_memory(spec); };
}

QLabel* wrappedLabel(QWidget* parent, const QString& objectName) {
  auto* label = new QLabel(parent);
  label->setObjectName(objectName);
  label->setWordWrap(true);
  label->setTextFormat(Qt::RichText);
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  return label;
}

}  // namespace

MemoryPage::MemoryPage(AppContext* context, QWidget* parent, MemoryWorker::Runner runner)
    : Page(context, parent), worker_(QStringLiteral("memory comparison"), runnerOrDefault(std::move(runner)), &generation_) {
  MemoryWorker::registerTypes();
  setObjectName(QStringLiteral("memory"));
  // The page scrolls: four charts, a table, the formula and the "what fits" panel do not all fit
  // a 1024x640 window, and each keeps the height it needs to be read.
  QVBoxLayout* layout = makeScrollingPage(this, scroll_);
  layout->addWidget(buildControls());
  layout->addWidget(buildBody(), 1);

  MemoryWorker* worker = worker_.worker();
  connect(this, &MemoryPage::runRequested, worker, &MemoryWorker::run);
  connect(worker, &MemoryWorker::finished, this, &MemoryPage::onFinished);
  connect(worker, &MemoryWorker::failed, this, &MemoryPage::onFailed);
  worker_.start();
  if (context) connect(context, &AppContext::themeChanged, charts_, &MemoryCharts::applyTheme);
}

MemoryPage::~MemoryPage() {
  generation_.next();  // a request still queued is skipped; one under way finishes and is dropped
  worker_.stop();
}

QWidget* MemoryPage::buildControls() {
  auto* box = new QWidget(this);
  auto* column = new QVBoxLayout(box);
  column->setContentsMargins(0, 0, 0, 0);
  auto* row = new QHBoxLayout();
  row->addWidget(new QLabel(tr("Optimizer"), box));
  optimizer_ = new QComboBox(box);
  optimizer_->addItem(tr("SGD"), static_cast<int>(Optimizer::Sgd));
  optimizer_->addItem(tr("SGD + momentum"), static_cast<int>(Optimizer::SgdMomentum));
  optimizer_->addItem(tr("Adam"), static_cast<int>(Optimizer::Adam));
  optimizer_->addItem(tr("AdamW"), static_cast<int>(Optimizer::AdamW));
  optimizer_->setCurrentIndex(2);  // Adam: two states per parameter, the memory ZeRO-1 shards
  optimizer_->setToolTip(tr("The optimizer's state per parameter: SGD none, momentum one buffer, Adam and AdamW two"));
  row->addWidget(optimizer_);
  row->addWidget(new QLabel(tr("rank"), box));
  rank_ = new QComboBox(box);
  rank_->setEnabled(false);
  row->addWidget(rank_);
  runButton_ = new QPushButton(QIcon(QStringLiteral(":/icons/run.svg")), tr("Run"), box);
  runButton_->setObjectName(QStringLiteral("primary"));
  runButton_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  runButton_->setToolTip(tr("Measures DDP, ZeRO-1, ZeRO-2 and ZeRO-3 on the settings bar's model, devices and batch (Ctrl+R)"));
  row->addWidget(runButton_);
  cancelButton_ = new QPushButton(tr("Cancel"), box);
  cancelButton_->setEnabled(false);
  cancelButton_->setToolTip(tr("Drops the comparison under way; the page keeps what it showed"));
  row->addWidget(cancelButton_);
  row->addStretch(1);
  column->addLayout(row);
  status_ = wrappedLabel(box, QStringLiteral("hintLabel"));
  status_->setTextFormat(Qt::PlainText);
  status_->setText(tr("Press “Run” (Ctrl+R) to measure every rank's memory under DDP and the three ZeRO stages."));
  column->addWidget(status_);
  next_ = wrappedLabel(box, QStringLiteral("hintLabel"));
  next_->setTextFormat(Qt::PlainText);
  column->addWidget(next_);
  caption_ = wrappedLabel(box, QStringLiteral("runCaption"));
  caption_->setVisible(false);
  column->addWidget(caption_);

  connect(runButton_, &QPushButton::clicked, this, &MemoryPage::run);
  connect(cancelButton_, &QPushButton::clicked, this, &MemoryPage::cancel);
  connect(rank_, &QComboBox::currentIndexChanged, this, [this] { showRank(); });
  connect(optimizer_, &QComboBox::currentIndexChanged, this, &MemoryPage::showNextRun);
  if (context()) connect(context(), &AppContext::settingsChanged, this, &MemoryPage::showNextRun);
  showNextRun();
  return box;
}

QWidget* MemoryPage::buildBody() {
  auto* box = new QWidget(this);
  auto* column = new QVBoxLayout(box);
  column->setContentsMargins(0, 0, 0, 0);
  column->setSpacing(8);
  charts_ = new MemoryCharts(box);
  column->addWidget(charts_, 1);
  stage_ = wrappedLabel(box, QStringLiteral("memoryStage"));
  stage_->setText(tr("Click a bar to see what rank 0 holds after that stage and why it differs from the formula there."));
  column->addWidget(stage_);
  connect(charts_, &MemoryCharts::stageClicked, this, &MemoryPage::showStage);

  table_ = new QTableWidget(0, 1 + 2 * MemoryCharts::kStrategies, box);
  table_->setObjectName(QStringLiteral("memoryTable"));
  table_->verticalHeader()->setVisible(false);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionMode(QAbstractItemView::NoSelection);
  const int rows = static_cast<int>(breakdownParts().size()) + 1;  // every part and the total
  // Every row without a scroll bar: the header is two lines high once the strategies name it.
  table_->setMinimumHeight(2 * table_->horizontalHeader()->sizeHint().height() + rows * table_->verticalHeader()->defaultSectionSize());
  column->addWidget(wrapInCard(tr("Peak and persistent bytes by kind, one rank"), table_, box));

  auto* formulaBox = new QWidget(box);
  auto* formulaColumn = new QVBoxLayout(formulaBox);
  formulaColumn->setContentsMargins(0, 0, 0, 0);
  formula_ = wrappedLabel(formulaBox, QStringLiteral("memoryFormula"));
  differences_ = wrappedLabel(formulaBox, QStringLiteral("memoryDifferences"));
  formulaColumn->addWidget(formula_);
  formulaColumn->addWidget(differences_);
  column->addWidget(wrapInCard(tr("The formula beside the measured figures (rank 0)"), formulaBox, box));

  fits_ = new MemoryFitsPanel(box);
  column->addWidget(wrapInCard(tr("What fits: a formula scaled to a model and GPUs you pick"), fits_, box));

  // The lesson on what these figures show, under them, where the lessons have one.
  const QString lessons = context() ? context()->lessonsDir() : QString();
  if (QFileInfo::exists(lessons + QStringLiteral("/zero/memory.md"))) {
    auto* lesson = new LessonPanel(box);
    lesson->setLessonsDir(lessons);
    lesson->showLesson(QStringLiteral("zero/memory"));
    lesson->setMinimumHeight(240);
    column->addWidget(wrapInCard(tr("The lesson"), lesson, box));
  }
  return box;
}

dpv::RunSpec MemoryPage::spec() const {
  dpv::RunSpec s = context() ? runSpecFromSettings(context()->settings()) : dpv::RunSpec{};
  const auto which = static_cast<Optimizer>(optimizer_->currentData().toInt());
  s.optimizer.kind = which == Optimizer::Adam    ? dpv::OptimizerKind::Adam
                     : which == Optimizer::AdamW ? dpv::OptimizerKind::AdamW
                                                 : dpv::OptimizerKind::Sgd;
  s.optimizer.momentum = which == Optimizer::SgdMomentum ? 0.9 : 0.0;
  return s;
}

void MemoryPage::setOptimizer(Optimizer optimizer) {
  const int i = optimizer_->findData(static_cast<int>(optimizer));
  if (i >= 0) optimizer_->setCurrentIndex(i);
}

void MemoryPage::run() {
  const dpv::RunSpec s = spec();
  const quint64 generation = generation_.next();  // a comparison still under way is now stale
  error_.clear();
  setBusy(true);
  status_->setText(tr("Measuring DDP, ZeRO-1, ZeRO-2 and ZeRO-3 on %1 (%2, batch %3): two iterations each…")
                       .arg(QString::fromStdString(s.preset), QString::fromStdString(s.devices))
                       .arg(s.batch));
  emit runRequested(s, generation);
}

void MemoryPage::cancel() {
  if (!running_) return;
  generation_.next();
  setBusy(false);
  status_->setText(result_ ? tr("Cancelled: the figures below are from the run before.") : tr("Cancelled."));
}

void MemoryPage::setBusy(bool busy) {
  running_ = busy;
  runButton_->setEnabled(!busy);
  cancelButton_->setEnabled(busy);
  setCursor(busy ? Qt::BusyCursor : Qt::ArrowCursor);
}

void MemoryPage::onFinished(const MemoryResult& result, quint64 generation) {
  if (!generation_.isCurrent(generation)) return;  // cancelled, or another run was asked for since
  setBusy(false);
  showComparison(result);
}

void MemoryPage::onFailed(const QString& message, quint64 generation) {
  if (!generation_.isCurrent(generation)) return;
  setBusy(false);
  error_ = message;
  status_->setText(message);
  emit failed(message);
}

// What "Run" will measure, from the settings bar and the optimizer now (the figures shown may be
// of an earlier run: their caption says which).
void MemoryPage::showNextRun() {
  const dpv::RunSpec s = spec();
  next_->setText(tr("Run measures: %1, with %2.")
                     .arg(QString::fromStdString(dpv::course::run_caption(s, 0, "DDP, ZeRO-1, ZeRO-2 and ZeRO-3")),
                          optimizer_->currentText()));
}

void MemoryPage::setRank(int rank) {
  if (rank >= 0 && rank < rank_->count()) rank_->setCurrentIndex(rank);
}

QString MemoryPage::statusText() const { return status_->text(); }
QString MemoryPage::captionText() const { return caption_->text(); }
QString MemoryPage::formulaText() const { return formula_->text(); }
QString MemoryPage::differencesText() const { return differences_->text(); }

void MemoryPage::showComparison(const MemoryResult& result) {
  if (!result) return;
  result_ = result;
  error_.clear();
  {
    const QSignalBlocker block(rank_);
    const int keep = rank_->currentIndex();
    rank_->clear();
    for (int r = 0; r < result->world; ++r) rank_->addItem(tr("rank %1").arg(r));
    rank_->setCurrentIndex(keep >= 0 && keep < result->world ? keep : 0);
    rank_->setEnabled(result->world > 1);
  }
  status_->setText(tr("Measured: the second iteration of each strategy, every tensor each rank holds after each stage."));
  caption_->setText(caption(*result));
  caption_->setVisible(true);
  formula_->setText(formulaHtml(*result));
  differences_->setText(differencesHtml(*result));
  fits_->setMeasured(result);
  showRank();
  emit resultShown();
}

void MemoryPage::showRank() {
  if (!result_) return;
  charts_->show(result_, std::max(0, rank_->currentIndex()));
  fillTable();
}

QList<Page::Shot> MemoryPage::screenshots() {
  // The charts after a run, then the page scrolled to the formula and to the "what fits" panel.
  auto afterRun = [this](std::function<void()> done) {
    auto ready = [this, done] {
      scroll_->verticalScrollBar()->setValue(0);
      done();
    };
    if (result_ || !error_.isEmpty()) return ready();
    whenRunEnds(this, ready);
    run();
  };
  auto scrolledTo = [this](QWidget* target) {
    return [this, target](std::function<void()> done) {
      scroll_->ensureWidgetVisible(target, 0, 0);
      done();
    };
  };
  return {Shot{QString(), afterRun}, Shot{QStringLiteral("formula"), scrolledTo(formula_)},
          Shot{QStringLiteral("fits"), scrolledTo(fits_)}};
}

}  // namespace gui
