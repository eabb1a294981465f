#include "gui/timeline/fault_lab.h"

#include <signal.h>

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>
#include <QTableWidget>
#include <QTextBrowser>
#include <QVBoxLayout>

#include "course/lesson_template.h"
#include "course/lessons.h"
#include "engine/error.h"
#include "gui/common/context.h"
#include "gui/timeline/page.h"

namespace gui {

namespace {
using dpv::course::FaultKind;
}  // namespace

FaultLabPanel::FaultLabPanel(AppContext* context, TimelinePage* page, ProcessRun* run, QWidget* parent)
    : QWidget(parent), context_(context), page_(page), run_(run) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* form = new QFormLayout();
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  rank_ = new QSpinBox(this);
  rank_->setToolTip(tr("The rank the fault is sent to"));
  fault_ = new QComboBox(this);
  fault_->addItem(tr("kill -9 (SIGKILL)"), static_cast<int>(FaultKind::Kill));
  fault_->addItem(tr("SIGSTOP (a hang)"), static_cast<int>(FaultKind::Stop));
  fault_->addItem(tr("SIGTERM"), static_cast<int>(FaultKind::Term));
  afterStep_ = new QSpinBox(this);
  afterStep_->setRange(0, kLatestFaultStep);
  afterStep_->setValue(1);
  afterStep_->setSpecialValueText(tr("by hand (Send now)"));
  afterStep_->setPrefix(tr("after step "));
  restart_ = new QCheckBox(tr("Restart from checkpoint"), this);
  restart_->setToolTip(tr("dpv launch --max-restarts 1 … -- train --ddp … --checkpoint <folder> --checkpoint-every 1: "
                          "the launcher restarts every worker once, and they resume from the newest checkpoint"));
  form->addRow(tr("Rank"), rank_);
  form->addRow(tr("Fault"), fault_);
  form->addRow(tr("When"), afterStep_);
  layout->addLayout(form);
  layout->addWidget(restart_);
  // One above the other: side by side they are cut off in the narrow side panel of a small window.
  auto* buttons = new QVBoxLayout();
  startButton_ = new QPushButton(tr("Run with this fault"), this);
  startButton_->setObjectName(QStringLiteral("faultLabRun"));
  sendNowButton_ = new QPushButton(tr("Send now"), this);
  sendNowButton_->setToolTip(tr("Sends the fault now to the rank's running process"));
  buttons->addWidget(startButton_);
  buttons->addWidget(sendNowButton_);
  layout->addLayout(buttons);
  ranks_ = new QTableWidget(0, 3, this);
  ranks_->setHorizontalHeaderLabels({tr("rank"), tr("pid"), tr("status")});
  ranks_->verticalHeader()->setVisible(false);
  ranks_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  ranks_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
  ranks_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::ResizeToContents);
  ranks_->horizontalHeader()->setSectionResizeMode(2, QHeaderView::Stretch);
  ranks_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  ranks_->setWordWrap(true);
  // A few ranks' rows; the lesson below gets the rest of the height.
  const int rowPx = fontMetrics().height() + 8;
  ranks_->setMinimumHeight(3 * rowPx);
  ranks_->setMaximumHeight(5 * rowPx);
  // Shown once a run has ranks: an empty table would take the lesson's room in a small window.
  ranks_->setVisible(false);
  layout->addWidget(ranks_);
  verdict_ = new QLabel(this);
  verdict_->setObjectName(QStringLiteral("notice"));
  verdict_->setWordWrap(true);
  verdict_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  verdict_->setVisible(false);
  layout->addWidget(verdict_);
  lesson_ = new QTextBrowser(this);
  lesson_->setOpenExternalLinks(true);
  layout->addWidget(lesson_, 1);

  connect(startButton_, &QPushButton::clicked, this, &FaultLabPanel::start);
  connect(sendNowButton_, &QPushButton::clicked, this, &FaultLabPanel::sendNow);
  connect(run_, &ProcessRun::launchEvent, this, &FaultLabPanel::onEvent);
  connect(run_, &ProcessRun::progress, this, &FaultLabPanel::onOutput);
  connect(run_, &ProcessRun::finished, this, &FaultLabPanel::onFinished);
  connect(context_, &AppContext::settingsChanged, this, &FaultLabPanel::updateControls);
  for (auto* control : {static_cast<QWidget*>(rank_), static_cast<QWidget*>(fault_), static_cast<QWidget*>(afterStep_)})
    control->setMinimumWidth(0);
  connect(fault_, &QComboBox::currentIndexChanged, this, &FaultLabPanel::showLesson);
  connect(rank_, &QSpinBox::valueChanged, this, &FaultLabPanel::showLesson);
  connect(afterStep_, &QSpinBox::valueChanged, this, &FaultLabPanel::showLesson);
  connect(restart_, &QCheckBox::toggled, this, &FaultLabPanel::showLesson);
  updateControls();
  showLesson();
}

dpv::course::FaultPlan FaultLabPanel::plan() const {
  dpv::course::FaultPlan p;
  p.rank = rank_->value();
  p.kind = static_cast<FaultKind>(fault_->currentData().toInt());
  p.after_step = afterStep_->value();
  p.restart = restart_->isChecked();
  p.world = std::max(1, ProcessRun::processCount(context_->settings().devices, nullptr));
  p.timeout_s = kLabTimeoutS;
  return p;
}

void FaultLabPanel::setPlan(const dpv::course::FaultPlan& p) {
  rank_->setValue(p.rank);
  fault_->setCurrentIndex(fault_->findData(static_cast<int>(p.kind)));
  afterStep_->setValue(p.after_step);
  restart_->setChecked(p.restart);
}

ProcessRunRequest FaultLabPanel::request() const {
  ProcessRunRequest r = page_->processRequest();
  r.steps = labSteps(restart_->isChecked(), afterStep_->value() == 0);
  r.traceSteps = kLabTraceSteps;
  r.timeoutS = kLabTimeoutS;
  r.events = true;
  r.maxRestarts = restart_->isChecked() ? 1 : 0;
  return r;
}

void FaultLabPanel::start() { startWith(request()); }

void FaultLabPanel::startWith(const ProcessRunRequest& request) {
  if (run_->running()) return;
  lab_.emplace(plan());
  ownsRun_ = true;
  secondsToEnd_ = 0;
  ranks_->setRowCount(0);
  ranks_->setVisible(false);
  verdict_->setVisible(false);
  showLesson();
  updateControls();
  page_->runAsProcesses(request);  // a start that fails ends through finished() at once
  updateControls();
}

void FaultLabPanel::sendNow() {
  if (!active()) return;
  lab_->fire_now();
  sendIfDue();
}

void FaultLabPanel::sendIfDue() {
  if (!active()) return;
  const std::optional<dpv::course::FaultLab::Send> send = lab_->due();
  if (!send || send->pid <= 1) return;
  // The pid is the one the launcher reported starting for this rank in this job.
  if (::kill(static_cast<pid_t>(send->pid), send->signal) != 0) return;
  lab_->sent();
  sinceFault_.start();
  showRanks();
  showLesson();
  updateControls();
}

void FaultLabPanel::continueStoppedRank() {
  if (!active()) return;
  const int rank = lab_->plan().rank;
  const auto& ranks = lab_->job().ranks;
  if (rank < 0 || rank >= static_cast<int>(ranks.size())) return;
  const dpv::course::RankStatus& s = ranks[static_cast<size_t>(rank)];
  if (s.state == dpv::course::RankState::Stopped && s.pid > 1) ::kill(static_cast<pid_t>(s.pid), SIGCONT);
}

void FaultLabPanel::onEvent(const dpv::course::LaunchEvent& event) {
  if (!active()) return;
  lab_->on_event(event);
  sendIfDue();
  showRanks();
}

void FaultLabPanel::onOutput(const QString& line) {
  if (!active()) return;
  lab_->on_output_line(line.toStdString());
  sendIfDue();
}

void FaultLabPanel::onFinished(const ProcessRunResult& result) {
  if (!active()) return;
  ownsRun_ = false;
  secondsToEnd_ = lab_->fault_sent() ? sinceFault_.elapsed() / 1000.0 : 0.0;
  const dpv::course::LaunchJob& job = lab_->job();
  QString text;
  if (job.finished && job.finished->ok) {
    text = tr("<b>The job succeeded</b> after %n restart(s)", nullptr, job.restarts);
    if (lab_->resumed_from()) text += tr(", resuming from the checkpoint of step %1").arg(*lab_->resumed_from());
    text += QLatin1Char('.');
  } else if (job.finished) {
    text = tr("<b>The launcher ended the job</b>%1: %2")
               .arg(job.first_failed_rank >= 0 ? tr(" (failed rank %1)").arg(job.first_failed_rank) : QString(),
                    QString::fromStdString(job.finished->message).toHtmlEscaped());
  } else {
    text = result.ok ? tr("<b>The job succeeded.</b>") : tr("<b>The job ended:</b> %1").arg(result.error.toHtmlEscaped());
  }
  verdict_->setText(text);
  verdict_->setVisible(true);
  showRanks();
  showLesson();
  updateControls();
  emit labFinished();
}

void FaultLabPanel::showRanks() {
  if (!lab_) return;
  const auto& ranks = lab_->job().ranks;
  ranks_->setRowCount(static_cast<int>(ranks.size()));
  ranks_->setVisible(!ranks.empty());
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    const dpv::course::RankStatus& s = ranks[static_cast<size_t>(r)];
    const QStringList cells = {QString::number(r), s.pid > 0 ? QString::number(s.pid) : QString(),
                               s.rank == r ? QString::fromStdString(dpv::course::rank_status_text(s)) : tr("not started")};
    for (int c = 0; c < cells.size(); ++c) ranks_->setItem(r, c, new QTableWidgetItem(cells[c]));
  }
  ranks_->resizeRowsToContents();
}

QString FaultLabPanel::rankStatusText(int rank) const {
  const QTableWidgetItem* item = rank >= 0 && rank < ranks_->rowCount() ? ranks_->item(rank, 2) : nullptr;
  return item ? item->text() : QString();
}

QString FaultLabPanel::verdict() const { return verdict_->isHidden() ? QString() : verdict_->text(); }

QString FaultLabPanel::lessonText() const { return lesson_->toPlainText(); }

void FaultLabPanel::showLesson() {
  // Before a run the facts are the plan's (nothing sent yet); after, the run's.
  const dpv::course::FaultFacts facts = lab_ ? lab_->facts(secondsToEnd_) : dpv::course::FaultLab(plan()).facts(0);
  try {
    const std::string text = dpv::course::load_lesson(context_->lessonsDir().toStdString(), "ddp/faults");
    // The lesson's "# Title" drawn as a "### " heading, as LessonPanel does: a side panel, not a page.
    // Only the title on the first line: a "# comment" in the lesson's Python block stays code.
    static const QRegularExpression heading(QStringLiteral("\\A#{1,2} "));
    lesson_->setMarkdown(QString::fromStdString(dpv::course::render_lesson("ddp/faults", text, dpv::course::fault_fact_table(facts)))
                             .replace(heading, QStringLiteral("### ")));
  } catch (const dpv::Error& e) {
    lesson_->setMarkdown(tr("**The lesson on failures and restarts is missing** (%1). The lab still works.")
                             .arg(QString::fromStdString(e.what()).toHtmlEscaped()));
  }
}

void FaultLabPanel::updateControls() {
  const int world = ProcessRun::processCount(context_->settings().devices, nullptr);
  rank_->setRange(0, std::max(0, world - 1));
  const bool running = run_->running();
  startButton_->setEnabled(world > 1 && !running);
  startButton_->setToolTip(world > 1 ? tr("Runs %1 processes of dpv train --ddp long enough for the fault to land while they train, and sends the fault")
                                           .arg(world)
                                     : tr("A fault lab needs at least 2 processes: choose cpu:2 or more"));
  sendNowButton_->setEnabled(active() && !lab_->fault_sent());
}

}  // namespace gui
