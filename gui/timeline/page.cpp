#include "gui/timeline/page.h"

#include <QFile>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QTextBrowser>
#include <QTextDocumentFragment>
#include <QToolTip>
#include <QVBoxLayout>
#include <map>
#include <qcustomplot.h>

#include "gui/common/context.h"
#include "gui/common/theme.h"
#include "gui/common/ui_helpers.h"
#include "gui/timeline/bars.h"
#include "gui/timeline/fault_lab.h"
#include "gui/common/lesson_panel.h"
#include "gui/common/scene_model.h"
#include "gui/runtime/engine_controller.h"
#include "gui/runtime/run_off_thread.h"
#include "gui/runtime/run_spec_from_settings.h"
#include "course/run_caption.h"
#include "engine/error.h"

namespace gui {

TimelinePage::TimelinePage(AppContext* context, QWidget* parent)
    : Page(context, parent),
      cancel_(std::make_shared<std::atomic<bool>>(false)),
      runner_(new OffThreadRunner(this)) {
  processRun_ = new ProcessRun(this);
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(12, 12, 12, 12);
  outer->setSpacing(10);

  auto* chartBox = new QWidget();
  auto* cl = new QVBoxLayout(chartBox);
  cl->setContentsMargins(0, 0, 0, 0);
  auto* top = new QHBoxLayout();
  summary_ = new QLabel(chartBox);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  measureButton_ = new QPushButton(QIcon(QStringLiteral(":/icons/run.svg")), tr("Measure %1 iterations").arg(kMeasuredIterations), chartBox);
  measureButton_->setObjectName(QStringLiteral("primary"));
  measureButton_->setToolTip(tr("Runs %1 whole iterations in the Iteration page's mode (DataParallel or DDP) with the current settings (and the same on one device), "
                                "then charts each stage's median with its spread").arg(kMeasuredIterations));
  runButton_ = new QPushButton(tr("Run one iteration"), chartBox);
  runButton_->setToolTip(tr("Runs one whole iteration in the Iteration page's mode on the engine and charts it (one sample)"));
  processButton_ = new QPushButton(chartBox);
  processButton_->setObjectName(QStringLiteral("runAsProcesses"));
  cancelButton_ = new QPushButton(tr("Cancel"), chartBox);
  cancelButton_->setToolTip(tr("Stops the launcher and every worker process"));
  cancelButton_->setVisible(false);
  auto* buttons = new QVBoxLayout();
  buttons->addWidget(measureButton_);
  buttons->addWidget(runButton_);
  buttons->addWidget(processButton_);
  buttons->addWidget(cancelButton_);
  buttons->addStretch(1);
  top->addWidget(summary_, 1);
  top->addLayout(buttons);
  cl->addLayout(top);
  runCaption_ = new QLabel(chartBox);
  runCaption_->setObjectName(QStringLiteral("runCaption"));
  runCaption_->setWordWrap(true);
  runCaption_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  cl->addWidget(runCaption_);
  speedup_ = new QLabel(chartBox);
  speedup_->setObjectName(QStringLiteral("speedup"));
  cores_ = new QLabel(chartBox);
  cores_->setObjectName(QStringLiteral("notice"));
  cores_->setWordWrap(true);
  processStatus_ = new QLabel(chartBox);
  processStatus_->setObjectName(QStringLiteral("notice"));
  processStatus_->setWordWrap(true);
  processStatus_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  processStatus_->setVisible(false);
  cl->addWidget(speedup_);
  cl->addWidget(cores_);
  cl->addWidget(processStatus_);
  buildTraceLoadRow(cl);
  legend_ = new QLabel(chartBox);
  legend_->setObjectName(QStringLiteral("hintLabel"));
  legend_->setWordWrap(true);
  cl->addWidget(legend_);
  emptyHint_ = new QLabel(tr("Nothing measured yet. Press “Measure %1 iterations”, or step through one iteration on the Iteration page.")
                              .arg(kMeasuredIterations), chartBox);
  emptyHint_->setObjectName(QStringLiteral("hintLabel"));
  emptyHint_->setWordWrap(true);
  cl->addWidget(emptyHint_);
  plot_ = new QCustomPlot();
  plot_->setMouseTracking(true);
  // The time axis also along the top, so it is in view whichever end of a scrolled chart shows.
  plot_->xAxis2->setVisible(true);
  plot_->xAxis2->setTickLabels(true);
  connect(plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), plot_->xAxis2, qOverload<const QCPRange&>(&QCPAxis::setRange));
  // Rows keep a readable height; with many devices the chart scrolls instead of squeezing them.
  plotScroll_ = new QScrollArea(chartBox);
  plotScroll_->setWidget(plot_);
  plotScroll_->setWidgetResizable(true);
  plotScroll_->setFrameShape(QFrame::NoFrame);
  plotScroll_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  plotScroll_->setMinimumHeight(120);
  cl->addWidget(plotScroll_, 1);

  table_ = new QTableWidget(0, 7);
  table_->setHorizontalHeaderLabels({tr("stage"), tr("collective"), tr("devices"), tr("bytes"), tr("time (µs)"),
                                     tr("algbw (GB/s)"), tr("busbw (GB/s)")});
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setAlternatingRowColors(true);
  auto* tableBox = new QWidget();
  auto* tl = new QVBoxLayout(tableBox);
  tl->setContentsMargins(0, 0, 0, 0);
  auto* tableHint = new QLabel(tr("algbw = bytes / time; busbw = algbw × (1 for broadcast and reduce, 2(n−1)/n for "
                                  "all-reduce, (n−1)/n for all-gather), as nccl-tests defines them."), tableBox);
  tableHint->setObjectName(QStringLiteral("hintLabel"));
  tableHint->setWordWrap(true);
  tl->addWidget(table_, 1);
  tl->addWidget(tableHint);

  lesson_ = new QTextBrowser();
  lesson_->setOpenExternalLinks(true);

  // Chart above the collectives, the lesson beside both; the learner can move the dividers.
  auto* left = new QSplitter(Qt::Vertical);
  left->addWidget(wrapInCard(tr("Timeline (measured by the engine)"), chartBox, this));
  left->addWidget(wrapInCard(tr("Collectives: bytes and bandwidth"), tableBox, this));
  left->setStretchFactor(0, 4);
  left->setStretchFactor(1, 1);
  left->setChildrenCollapsible(false);
  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(left);
  // The lesson and the fault lab share the right side: the lab's own lesson is inside its tab.
  faultLab_ = new FaultLabPanel(context, this, processRun_);
  sideTabs_ = new QTabWidget();
  sideTabs_->addTab(lesson_, tr("Lesson"));
  sideTabs_->addTab(faultLab_, tr("Fault lab"));
  sideTabs_->setDocumentMode(true);
  auto* lessonCard = wrapInCard(tr("Learn and try"), sideTabs_, this);
  lessonCard->setMinimumWidth(220);
  split->addWidget(lessonCard);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  split->setChildrenCollapsible(false);
  outer->addWidget(split, 1);

  connect(measureButton_, &QPushButton::clicked, this, &TimelinePage::measure);
  connect(runButton_, &QPushButton::clicked, this, &TimelinePage::runIteration);
  connect(processButton_, &QPushButton::clicked, this, [this] { runAsProcesses(processRequest()); });
  connect(cancelButton_, &QPushButton::clicked, this, &TimelinePage::cancelProcesses);
  connect(processRun_, &ProcessRun::progress, this, [this](const QString& line) {
    processStatus_->setText(tr("Rank 0: %1").arg(line.toHtmlEscaped()));
    emit processProgress(line);
  });
  connect(processRun_, &ProcessRun::finished, this, &TimelinePage::onProcessRunFinished);
  connect(this, &TimelinePage::traceLoadFinished, this, &TimelinePage::onProcessTraceLoaded);
  connect(context, &AppContext::settingsChanged, this, &TimelinePage::updateProcessButton);
  connect(plot_, &QCustomPlot::mouseMove, this, &TimelinePage::onMouseMove);
  connect(context, &AppContext::themeChanged, this, [this] { applyTheme(); refresh(); });
  if (EngineController* e = context->engine()) {
    connect(e, &EngineController::iterationCompleted, this, &TimelinePage::refresh);
    connect(e, &EngineController::settingsApplied, this, [this] {
      // A measurement of other settings is not this one's.
      seriesGeneration_.next();
      series_.reset();
      seriesError_.clear();
      measureButton_->setEnabled(!runner_->busy());
      refresh();
    });
    connect(e, &EngineController::busyChanged, this, [this](bool busy) { runButton_->setEnabled(!busy); });
  } else {
    measureButton_->setEnabled(false);
    runButton_->setEnabled(false);
  }
  updateProcessButton();
  applyTheme();
  loadLesson();
  refresh();
}

TimelinePage::~TimelinePage() {
  cancel_->store(true);  // a measurement in flight stops after its current iteration
  if (traceLoadCancel_) traceLoadCancel_->store(true);  // and a trace being read, at once
  faultLab_->continueStoppedRank();  // so the launcher's SIGTERM, as the run is stopped, ends it
}

void TimelinePage::loadLesson() {
  QString error;
  const QString md = loadLessonMarkdown(context()->lessonsDir(), QStringLiteral("timeline"), &error);
  lesson_->setMarkdown(md.isEmpty() ? tr("**The lesson on reading the timeline is missing** (%1). The chart and its numbers still work.")
                                          .arg(error.toHtmlEscaped())
                                    : md);
}

QString TimelinePage::lessonText() const { return lesson_->toPlainText(); }

void TimelinePage::applyTheme() {
  const QString theme = context()->theme();
  const SceneColors& c = sceneColors(theme);
  const QColor bg = theme == QLatin1String("dark") ? c.panel : QColor(Qt::white);
  plot_->setBackground(bg);
  for (QCPAxis* axis : {plot_->xAxis, plot_->xAxis2, plot_->yAxis}) {
    axis->setBasePen(QPen(c.subtext));
    axis->setTickPen(QPen(c.subtext));
    axis->setSubTickPen(QPen(c.subtext));
    axis->setTickLabelColor(c.text);
    axis->setLabelColor(c.text);
    axis->grid()->setPen(QPen(c.memoryTrack, 1, Qt::DotLine));
  }
  showLegend();
}

void TimelinePage::showLegend() {
  const QString theme = context()->theme();
  auto item = [](const QColor& color, const QString& title) {
    return QStringLiteral("<span style='white-space:nowrap'><span style='color:%1'>■</span>&nbsp;%2</span>")
        .arg(color.name(), title.toHtmlEscaped().replace(QLatin1Char(' '), QStringLiteral("&nbsp;")));
  };
  QStringList items;
  for (int kind : legendKinds_) items << item(stageColor(kind, theme), stageShortTitle(static_cast<dpv::StageKind>(kind)));
  if (legendAllReduce_) items << item(sceneColors(theme).subtext, tr("Bucket all-reduce"));
  legend_->setText(items.join(QStringLiteral(" &nbsp; ")));
}

QString TimelinePage::legendText() const { return QTextDocumentFragment::fromHtml(legend_->text()).toPlainText(); }

void TimelinePage::runIteration() {
  opened_.reset();  // back to the engine's own iterations
  openedCommand_.clear();
  series_.reset();  // the chart shows this one iteration
  refresh();
  if (EngineController* e = context()->engine()) {
    runButton_->setEnabled(false);
    e->requestIteration();
  }
}

int TimelinePage::collectiveRows() const { return table_->rowCount(); }

QString TimelinePage::summary() const { return summary_->text(); }

QString TimelinePage::runCaption() const { return runCaption_->text(); }

void TimelinePage::setRows(const QStringList& labels) {
  rows_ = static_cast<int>(labels.size());
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (int r = 0; r < rows_; ++r) ticker->addTick(rows_ - 1 - r, labels.at(r));
  plot_->yAxis->setTicker(ticker);
  plot_->yAxis->setSubTicks(false);
  plot_->yAxis->setRange(-0.7, std::max(0, rows_ - 1) + 0.7);
  // A row a line of text high plus a little: eight lanes fit a 1024x640 window's chart with both
  // time axes, and the area scrolls only when even that is short.
  const int rowPx = std::max(18, fontMetrics().height() + 4);
  plot_->setMinimumHeight(rowPx * std::max(rows_, 2) + 5 * fontMetrics().height() + 24);
}

void TimelinePage::refresh() {
  ddpLanes_ = dpv::TraceLanes{};
  // DataParallel's stages, unless a drawn trace (drawLanes) lists its own.
  legendKinds_.clear();
  for (dpv::StageKind kind : kTimelineKinds) legendKinds_ << static_cast<int>(kind);
  legendAllReduce_ = false;
  bars_.clear();
  plot_->clearItems();
  table_->setRowCount(0);
  speedup_->setVisible(false);
  cores_->setVisible(false);
  drawCapNotice_->setVisible(false);
  summary_->setToolTip(QString());
  if (opened_) {
    runCaption_->setText(tr("Data: the trace %1").arg(openedCommand_.isEmpty() ? QFileInfo(openedPath_).fileName() : openedCommand_));
    drawOpenedTrace();
  } else if (series_) {
    runCaption_->setText(tr("Data: %1").arg(QString::fromStdString(dpv::course::run_caption(series_->config.run))));
    drawSeries();
  } else {
    runCaption_->setText(tr("Data: the Iteration page's run, %1").arg(QString::fromStdString(dpv::course::run_caption(runSpecFromSettings(context()->settings())))));
    drawLastIteration();
  }
  showLegend();
  plot_->replot();
  table_->resizeColumnToContents(0);  // the stage names, whole
  emit refreshed();
}

void TimelinePage::addCollectiveRows(const dpv::StageEvent& ev) {
  for (const auto& c : ev.collectives) {
    const int row = table_->rowCount();
    table_->insertRow(row);
    const QStringList cells = {QString::fromStdString(ev.stage.title), QString::fromLatin1(dpv::collective_op_name(c.op)), QString::number(c.ranks),
                               formatBytes(static_cast<double>(c.bytes)), QString::number(c.seconds * 1e6, 'f', 1),
                               QString::number(c.algbw, 'f', 3), QString::number(c.busbw, 'f', 3)};
    for (int col = 0; col < cells.size(); ++col) table_->setItem(row, col, new QTableWidgetItem(cells[col]));
  }
}

void TimelinePage::drawLastIteration() {
  EngineController* e = context()->engine();
  const bool complete = e && !e->lastCompleted().isEmpty();
  const QVector<dpv::StageEvent> events = !e ? QVector<dpv::StageEvent>{} : complete ? e->lastCompleted() : e->events();
  const IterationInfo info = complete ? e->lastCompletedInfo() : (e ? e->info() : IterationInfo{});
  if (info.ddp && !events.isEmpty()) return drawDdpIteration(events, info, complete);
  emptyHint_->setVisible(events.isEmpty());
  plotScroll_->setVisible(!events.isEmpty());
  const QString theme = context()->theme();

  const int devices = static_cast<int>(info.deviceLabels.size());
  // Rows from the top: the iteration's stages (wall clock), then GPU 0, GPU 1, ...
  QStringList rows{tr("stages (wall)")};
  for (int d = 0; d < devices; ++d) rows << info.deviceTitles.at(static_cast<size_t>(d)).name;
  setRows(rows);
  plot_->xAxis->setLabel(tr("time since the iteration began (ms)"));
  plot_->yAxis->setLabel(QString());

  double endMs = 0;
  std::map<int, double> perKindMs;
  auto addBar = [&](int row, double s, double t, int kind, const QString& text) {
    drawTimelineBar(plot_, rows_ - 1 - row, s, t, stageColor(kind, theme));
    bars_.append(Bar{row, s, t, kind, text});
    endMs = std::max(endMs, t);
  };
  // The engine's clock also ran while the iteration waited for its first step and while the
  // learner read between steps: the course layer takes that out (measured_work).
  const dpv::course::IterationWork work = dpv::course::measured_work(std::vector<dpv::StageEvent>(events.begin(), events.end()));
  for (const auto& ev : work.events) {
    const int kind = static_cast<int>(ev.stage.kind);
    const double s = ev.t_start * 1e3, t = ev.t_end * 1e3;
    perKindMs[kind] += t - s;
    QString text = tr("%1\n%2 – %3 ms (%4 ms)").arg(QString::fromStdString(ev.stage.title)).arg(s, 0, 'f', 3).arg(t, 0, 'f', 3).arg(t - s, 0, 'f', 3);
    if (ev.bytes_moved) text += tr("\n%1 moved").arg(formatBytes(static_cast<double>(ev.bytes_moved)));
    for (const auto& c : ev.collectives) {
      text += tr("\n%1: %2, algbw %3 GB/s, busbw %4 GB/s").arg(QString::fromLatin1(dpv::collective_op_name(c.op)), formatBytes(static_cast<double>(c.bytes)))
                  .arg(c.algbw, 0, 'f', 2).arg(c.busbw, 0, 'f', 2);
    }
    addBar(0, s, t, kind, text);
    for (const auto& d : ev.devices) {
      if (d.busy_end <= d.busy_start || d.device < 0 || d.device >= devices) continue;
      const double ds = d.busy_start * 1e3, dt = d.busy_end * 1e3;
      addBar(1 + d.device, ds, dt, kind,
             tr("%1 on %2\n%3 – %4 ms (%5 ms)\nmemory %6, peak %7").arg(QString::fromStdString(ev.stage.title), info.deviceTitles.at(static_cast<size_t>(d.device)).name)
                 .arg(ds, 0, 'f', 3).arg(dt, 0, 'f', 3).arg(dt - ds, 0, 'f', 3)
                 .arg(formatBytes(static_cast<double>(d.memory_bytes)), formatBytes(static_cast<double>(d.memory_peak))));
    }
    addCollectiveRows(ev);
  }
  plot_->xAxis->setRange(0, endMs > 0 ? endMs * 1.03 : 1.0);

  const bool simulated = info.deviceSpec.startsWith(QLatin1String("cpu"));
  const unsigned cores = dpv::course::host_cpu_count();
  if (simulated && cores > 0 && devices > static_cast<int>(cores)) {
    cores_->setText(tr("%1 simulated devices are threads sharing %2 CPU cores: at most %2 compute at once, so their "
                       "bars take turns instead of overlapping.").arg(devices).arg(cores));
    cores_->setVisible(true);
  }
  if (events.isEmpty()) {
    summary_->setText(tr("The chart shows when each device was busy in each stage of DataParallel's iterations, measured by the engine. "
                         "One iteration is one noisy sample: measure %1 to see the median and the spread.").arg(kMeasuredIterations));
    return;
  }
  QStringList parts;
  for (const auto& [kind, ms] : perKindMs) parts << QStringLiteral("%1 %2 ms").arg(stageShortTitle(static_cast<dpv::StageKind>(kind))).arg(ms, 0, 'f', 3);
  summary_->setText(tr("<b>Iteration %1</b> of DataParallel on %2 (%3)%4: %5 ms of engine time, scatter to step%6. "
                       "This is <b>one sample</b>: “Measure %7 iterations” gives the median and the spread.%8")
                        .arg(info.iteration)
                        .arg(info.deviceSpec, info.transport)
                        .arg(complete ? QString() : tr(", in progress"))
                        .arg(work.seconds * 1e3, 0, 'f', 3)
                        .arg(idleText(work))
                        .arg(kMeasuredIterations)
                        .arg(simulated ? tr(" Simulated devices are CPU threads: CPU times, not GPU times.") : QString()));
  summary_->setToolTip(tr("Time per stage: %1").arg(parts.join(QStringLiteral(", "))));
}

void TimelinePage::onMouseMove(QMouseEvent* event) {
  const double x = plot_->xAxis->pixelToCoord(event->position().x());
  const double y = plot_->yAxis->pixelToCoord(event->position().y());
  // A few pixels of slack so very short stages can still be hovered.
  const double slack = std::abs(plot_->xAxis->pixelToCoord(4) - plot_->xAxis->pixelToCoord(0));
  for (const Bar& bar : bars_) {
    const double rowY = rows_ - 1 - bar.row;
    const double high = std::max(bar.endMs, bar.highMs);
    if (std::abs(y - rowY) <= kBarHalfHeight && x >= bar.startMs - slack && x <= high + slack) {
      QToolTip::showText(event->globalPosition().toPoint(), bar.text, plot_);
      return;
    }
  }
  QToolTip::hideText();
}

QList<Page::Shot> TimelinePage::screenshots() {
  return {Shot{QString(), [this](std::function<void()> done) {
    if (!context()->engine()) {
      refresh();
      return done();
    }
    // Measure first; done when the series is drawn (or the measurement failed).
    auto* connection = new QMetaObject::Connection;
    *connection = connect(this, &TimelinePage::measured, this, [connection, done](bool) {
      QObject::disconnect(*connection);
      delete connection;
      done();
    });
    measure();
  }},
  // DDP on mlp-bn: two iterations, so the second one's rebuilt buckets overlap its backward.
  Shot{QStringLiteral("ddp"), [this](std::function<void()> done) {
    EngineController* e = context()->engine();
    if (!e) return done();
    AppSettings s = context()->settings();
    s.strategy = dpv::StrategyKind::DistributedDataParallel;
    s.preset = QStringLiteral("mlp-bn");
    auto completed = std::make_shared<int>(0);
    auto c1 = std::make_shared<QMetaObject::Connection>();
    auto c2 = std::make_shared<QMetaObject::Connection>();
    auto finish = [c1, c2, done, this] {
      QObject::disconnect(*c1);
      QObject::disconnect(*c2);
      series_.reset();  // show the DDP iteration, not the measured series
      opened_.reset();
      refresh();
      done();
    };
    *c1 = connect(e, &EngineController::iterationCompleted, this, [e, completed, finish] {
      if (++*completed >= 2) return finish();
      e->requestIteration();
    });
    *c2 = connect(e, &EngineController::engineError, this, finish);
    context()->setSettings(s);  // the engine starts afresh in DDP mode
    e->requestIteration();
  }},
  // The fault lab's tab, as it stands before a run: its controls and the lesson written from the plan.
  Shot{QStringLiteral("fault-lab"), [this](std::function<void()> done) {
    showFaultLab();
    done();
  }},
  // The same settings as real processes (dpv launch): one group of lanes per rank, from their merged trace.
  Shot{QStringLiteral("processes"), [this](std::function<void()> done) {
    auto connection = std::make_shared<QMetaObject::Connection>();
    *connection = connect(this, &TimelinePage::processRunFinished, this, [connection, done](bool) {
      QObject::disconnect(*connection);
      done();
    });
    runAsProcesses(processRequest());
  }}};
}

}  // namespace gui
