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
#include <QTableWidget>
#include <QToolTip>
#include <QVBoxLayout>
#include <map>
#include <qcustomplot.h>

#include "gui/app/context.h"
#include "gui/app/theme.h"
#include "gui/app/ui_helpers.h"
#include "gui/iteration/scene_model.h"
#include "gui/runtime/engine_controller.h"
#include "engine/error.h"

namespace gui {

namespace {
constexpr dpv::StageKind kAllKinds[] = {dpv::StageKind::Scatter, dpv::StageKind::Replicate, dpv::StageKind::Forward,
                                        dpv::StageKind::Gather,  dpv::StageKind::Loss,      dpv::StageKind::GradScatter,
                                        dpv::StageKind::Backward, dpv::StageKind::ReduceGrads, dpv::StageKind::Step};
}

TimelinePage::TimelinePage(AppContext* context, QWidget* parent) : Page(context, parent) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(12, 12, 12, 12);
  outer->setSpacing(10);

  auto* chartBox = new QWidget();
  auto* cl = new QVBoxLayout(chartBox);
  cl->setContentsMargins(0, 0, 0, 0);
  auto* top = new QHBoxLayout();
  summary_ = new QLabel(chartBox);
  summary_->setWordWrap(true);
  runButton_ = new QPushButton(QIcon(QStringLiteral(":/icons/run.svg")), tr("Run one iteration"), chartBox);
  runButton_->setObjectName(QStringLiteral("primary"));
  runButton_->setToolTip(tr("Runs a whole DataParallel iteration with the current settings and charts it"));
  top->addWidget(summary_, 1);
  top->addWidget(runButton_, 0, Qt::AlignTop);
  cl->addLayout(top);
  legend_ = new QHBoxLayout();
  legend_->setSpacing(12);
  cl->addLayout(legend_);
  emptyHint_ = new QLabel(tr("No iteration has run yet. Press “Run one iteration”, or step through one on the Iteration page."), chartBox);
  emptyHint_->setObjectName(QStringLiteral("hintLabel"));
  cl->addWidget(emptyHint_);
  plot_ = new QCustomPlot(chartBox);
  plot_->setMinimumHeight(220);
  plot_->setMouseTracking(true);
  cl->addWidget(plot_, 1);
  outer->addWidget(wrapInCard(tr("Timeline of the last iteration (measured)"), chartBox, this), 3);

  table_ = new QTableWidget(0, 7);
  table_->setHorizontalHeaderLabels({tr("stage"), tr("collective"), tr("devices"), tr("bytes"), tr("time (µs)"),
                                     tr("algbw (GB/s)"), tr("busbw (GB/s)")});
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
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
  outer->addWidget(wrapInCard(tr("Collectives: bytes and bandwidth"), tableBox, this), 2);

  for (dpv::StageKind kind : kAllKinds) {
    auto* item = new QLabel(this);
    item->setObjectName(QStringLiteral("hintLabel"));
    item->setProperty("stageKind", static_cast<int>(kind));
    legend_->addWidget(item);
  }
  legend_->addStretch(1);

  connect(runButton_, &QPushButton::clicked, this, &TimelinePage::runIteration);
  connect(plot_, &QCustomPlot::mouseMove, this, &TimelinePage::onMouseMove);
  connect(context, &AppContext::themeChanged, this, [this] { applyTheme(); refresh(); });
  if (EngineController* e = context->engine()) {
    connect(e, &EngineController::iterationCompleted, this, &TimelinePage::refresh);
    connect(e, &EngineController::settingsApplied, this, &TimelinePage::refresh);
    connect(e, &EngineController::busyChanged, this, [this](bool busy) { runButton_->setEnabled(!busy); });
  }
  applyTheme();
  refresh();
}

void TimelinePage::applyTheme() {
  const QString theme = context()->theme();
  const SceneColors& c = sceneColors(theme);
  const QColor bg = theme == QLatin1String("dark") ? c.panel : QColor(Qt::white);
  plot_->setBackground(bg);
  for (QCPAxis* axis : {plot_->xAxis, plot_->yAxis}) {
    axis->setBasePen(QPen(c.subtext));
    axis->setTickPen(QPen(c.subtext));
    axis->setSubTickPen(QPen(c.subtext));
    axis->setTickLabelColor(c.text);
    axis->setLabelColor(c.text);
    axis->grid()->setPen(QPen(c.memoryTrack, 1, Qt::DotLine));
  }
  for (int i = 0; i < legend_->count(); ++i) {
    auto* label = qobject_cast<QLabel*>(legend_->itemAt(i)->widget());
    if (!label) continue;
    const int kind = label->property("stageKind").toInt();
    label->setText(QStringLiteral("<span style='color:%1'>■</span> %2")
                       .arg(stageColor(kind, theme).name(), stageShortTitle(static_cast<dpv::StageKind>(kind))));
  }
}

void TimelinePage::runIteration() {
  if (opened_) {  // back to the engine's own iterations
    opened_.reset();
    refresh();
  }
  if (EngineController* e = context()->engine()) {
    runButton_->setEnabled(false);
    e->requestIteration();
  }
}

int TimelinePage::collectiveRows() const { return table_->rowCount(); }

QString TimelinePage::summary() const { return summary_->text(); }

QString TimelinePage::openTrace(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return tr("Cannot open %1: %2").arg(path, file.errorString());
  const QByteArray bytes = file.readAll();
  try {
    opened_ = dpv::read_trace_lanes(bytes.toStdString(), QFileInfo(path).fileName().toStdString());
  } catch (const dpv::Error& e) {
    return QString::fromStdString(e.what());
  }
  openedPath_ = path;
  refresh();
  return QString();
}

void TimelinePage::refresh() {
  bars_.clear();
  plot_->clearItems();
  table_->setRowCount(0);
  if (opened_) {
    drawOpenedTrace();
    emit refreshed();
    return;
  }
  EngineController* e = context()->engine();
  const bool complete = e && !e->lastCompleted().isEmpty();
  const QVector<dpv::StageEvent> events = !e ? QVector<dpv::StageEvent>{} : complete ? e->lastCompleted() : e->events();
  const IterationInfo info = complete ? e->lastCompletedInfo() : (e ? e->info() : IterationInfo{});
  emptyHint_->setVisible(events.isEmpty());
  plot_->setVisible(!events.isEmpty());
  const QString theme = context()->theme();

  const int devices = static_cast<int>(info.deviceLabels.size());
  // Rows from the top: the iteration's stages (wall clock), then GPU 0, GPU 1, ...
  auto rowY = [devices](int row) { return static_cast<double>(devices - row); };
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  ticker->addTick(rowY(0), tr("stages (wall)"));
  for (int d = 0; d < devices; ++d) ticker->addTick(rowY(1 + d), splitDeviceLabel(info.deviceLabels.at(d)).first);
  plot_->yAxis->setTicker(ticker);
  plot_->yAxis->setSubTicks(false);
  plot_->yAxis->setRange(-0.7, devices + 0.7);
  plot_->xAxis->setLabel(tr("time since the iteration began (ms)"));
  plot_->yAxis->setLabel(QString());

  double endMs = 0;
  std::map<int, double> perKindMs;
  auto addBar = [&](int row, double s, double t, int kind, const QString& text) {
    auto* rect = new QCPItemRect(plot_);
    const double y = rowY(row);
    rect->topLeft->setCoords(s, y + 0.32);
    rect->bottomRight->setCoords(std::max(t, s + 1e-6), y - 0.32);
    const QColor color = stageColor(kind, theme);
    rect->setBrush(color);
    rect->setPen(QPen(color.darker(125)));
    rect->setSelectable(false);
    bars_.append(Bar{row, s, t, kind, text});
    endMs = std::max(endMs, t);
  };
  // Stages are laid end to end by their measured durations: when the learner steps through an
  // iteration, the pauses between stages are their reading time, not the engine's.
  double offsetMs = 0;
  for (const auto& ev : events) {
    const int kind = static_cast<int>(ev.stage.kind);
    const double shift = offsetMs - ev.t_start * 1e3;
    const double s = offsetMs, t = ev.t_end * 1e3 + shift;
    offsetMs = t;
    perKindMs[kind] += t - s;
    QString text = tr("%1\n%2 – %3 ms (%4 ms)").arg(QString::fromStdString(ev.stage.title)).arg(s, 0, 'f', 3).arg(t, 0, 'f', 3).arg(t - s, 0, 'f', 3);
    if (ev.bytes_moved) text += tr("\n%1 moved").arg(formatBytes(static_cast<double>(ev.bytes_moved)));
    for (const auto& c : ev.collectives) {
      text += tr("\n%1: %2, algbw %3 GB/s, busbw %4 GB/s").arg(QString::fromStdString(c.op), formatBytes(static_cast<double>(c.bytes)))
                  .arg(c.algbw, 0, 'f', 2).arg(c.busbw, 0, 'f', 2);
    }
    addBar(0, s, t, kind, text);
    for (const auto& d : ev.devices) {
      if (d.busy_end <= d.busy_start || d.device < 0 || d.device >= devices) continue;
      const double ds = d.busy_start * 1e3 + shift, dt = d.busy_end * 1e3 + shift;
      addBar(1 + d.device, ds, dt, kind,
             tr("%1 on %2\n%3 – %4 ms (%5 ms)\nmemory %6, peak %7").arg(QString::fromStdString(ev.stage.title), splitDeviceLabel(info.deviceLabels.at(d.device)).first)
                 .arg(ds, 0, 'f', 3).arg(dt, 0, 'f', 3).arg(dt - ds, 0, 'f', 3)
                 .arg(formatBytes(static_cast<double>(d.memory_bytes)), formatBytes(static_cast<double>(d.memory_peak))));
    }
    for (const auto& c : ev.collectives) {
      const int row = table_->rowCount();
      table_->insertRow(row);
      const QStringList cells = {QString::fromStdString(ev.stage.title), QString::fromStdString(c.op), QString::number(c.ranks),
                                 formatBytes(static_cast<double>(c.bytes)), QString::number(c.seconds * 1e6, 'f', 1),
                                 QString::number(c.algbw, 'f', 3), QString::number(c.busbw, 'f', 3)};
      for (int col = 0; col < cells.size(); ++col) table_->setItem(row, col, new QTableWidgetItem(cells[col]));
    }
  }
  plot_->xAxis->setRange(0, endMs > 0 ? endMs * 1.03 : 1.0);
  plot_->replot();

  if (events.isEmpty()) {
    summary_->setText(tr("The chart shows when each device was busy in each stage of one DataParallel iteration, measured by the engine."));
  } else {
    QStringList parts;
    for (const auto& [kind, ms] : perKindMs) parts << QStringLiteral("%1 %2 ms").arg(stageShortTitle(static_cast<dpv::StageKind>(kind))).arg(ms, 0, 'f', 3);
    const bool simulated = info.deviceSpec.startsWith(QLatin1String("cpu"));
    summary_->setText(tr("<b>Iteration %1</b> on %2 (%3)%4: %5 ms of engine time from scatter to step (stages end to end; pauses between steps left out).<br>Time per stage: %6.%7")
                          .arg(info.iteration)
                          .arg(info.deviceSpec, info.transport)
                          .arg(complete ? QString() : tr(", in progress"))
                          .arg(endMs, 0, 'f', 3)
                          .arg(parts.join(QStringLiteral(", ")))
                          .arg(simulated ? tr("<br><i>Simulated devices: each is a CPU thread, so these are CPU times, not GPU times.</i>") : QString()));
  }
  emit refreshed();
}

void TimelinePage::drawOpenedTrace() {
  const dpv::TraceLanes& t = *opened_;
  const QString theme = context()->theme();
  const int lanes = static_cast<int>(t.lanes.size());
  emptyHint_->setVisible(lanes == 0);
  plot_->setVisible(lanes > 0);
  // Rows from the top: lane 0 (rank 0's first track) first.
  auto rowY = [lanes](int row) { return static_cast<double>(lanes - 1 - row); };
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (int l = 0; l < lanes; ++l) {
    const dpv::TraceLane& lane = t.lanes[static_cast<size_t>(l)];
    QString process = QString::fromStdString(lane.process);
    process = process.section(QLatin1Char(':'), 0, 0);  // "rank 1: dpviz DDP" -> "rank 1"
    ticker->addTick(rowY(l), QStringLiteral("%1 · %2").arg(process, QString::fromStdString(lane.thread)));
  }
  plot_->yAxis->setTicker(ticker);
  plot_->yAxis->setSubTicks(false);
  plot_->yAxis->setRange(-0.7, std::max(0, lanes - 1) + 0.7);
  plot_->xAxis->setLabel(tr("time in the trace (ms)"));

  double endMs = 0;
  for (const dpv::TraceSpan& span : t.spans) {
    int kind = -1;
    for (dpv::StageKind k : kAllKinds)
      if (span.category == dpv::stage_kind_name(k)) kind = static_cast<int>(k);
    const double s = span.start_us / 1e3, e = (span.start_us + span.duration_us) / 1e3;
    auto* rect = new QCPItemRect(plot_);
    const double y = rowY(span.lane);
    rect->topLeft->setCoords(s, y + 0.32);
    rect->bottomRight->setCoords(std::max(e, s + 1e-6), y - 0.32);
    const QColor color = kind >= 0 ? stageColor(kind, theme) : sceneColors(theme).subtext;
    rect->setBrush(color);
    rect->setPen(QPen(color.darker(125)));
    rect->setSelectable(false);
    const dpv::TraceLane& lane = t.lanes[static_cast<size_t>(span.lane)];
    bars_.append(Bar{span.lane, s, e, kind,
                     tr("%1\n%2 · %3\n%4 – %5 ms (%6 ms)")
                         .arg(QString::fromStdString(span.name), QString::fromStdString(lane.process),
                              QString::fromStdString(lane.thread))
                         .arg(s, 0, 'f', 3).arg(e, 0, 'f', 3).arg(e - s, 0, 'f', 3)});
    endMs = std::max(endMs, e);
    // Collectives the span carries (the engine's traces put them in args.collectives).
    const QJsonObject args = QJsonDocument::fromJson(QByteArray::fromStdString(span.args)).object();
    for (const QJsonValue& c : args.value(QStringLiteral("collectives")).toArray()) {
      const QJsonObject r = c.toObject();
      const int row = table_->rowCount();
      table_->insertRow(row);
      const QStringList cells = {QStringLiteral("%1 (%2)").arg(QString::fromStdString(span.name), QString::fromStdString(lane.process).section(QLatin1Char(':'), 0, 0)),
                                 r.value(QStringLiteral("op")).toString(), QString::number(r.value(QStringLiteral("ranks")).toInt()),
                                 formatBytes(r.value(QStringLiteral("bytes")).toDouble()),
                                 QString::number(r.value(QStringLiteral("seconds")).toDouble() * 1e6, 'f', 1),
                                 QString::number(r.value(QStringLiteral("algbw_GBps")).toDouble(), 'f', 3),
                                 QString::number(r.value(QStringLiteral("busbw_GBps")).toDouble(), 'f', 3)};
      for (int col = 0; col < cells.size(); ++col) table_->setItem(row, col, new QTableWidgetItem(cells[col]));
    }
  }
  plot_->xAxis->setRange(0, endMs > 0 ? endMs * 1.03 : 1.0);
  plot_->replot();
  summary_->setText(tr("<b>Opened trace</b> %1: %2 process%3, %4 lane%5, %6 span%7 over %8 ms. "
                       "Each process of a merged trace is one rank; press “Run one iteration” to go back to the engine's iterations.")
                        .arg(QFileInfo(openedPath_).fileName().toHtmlEscaped())
                        .arg(t.processes).arg(t.processes == 1 ? QString() : QStringLiteral("es"))
                        .arg(lanes).arg(lanes == 1 ? QString() : QStringLiteral("s"))
                        .arg(t.spans.size()).arg(t.spans.size() == 1 ? QString() : QStringLiteral("s"))
                        .arg(endMs, 0, 'f', 3));
}

void TimelinePage::onMouseMove(QMouseEvent* event) {
  const double x = plot_->xAxis->pixelToCoord(event->position().x());
  const double y = plot_->yAxis->pixelToCoord(event->position().y());
  const int devices = static_cast<int>(plot_->yAxis->range().upper - 0.7 + 0.5);
  for (const Bar& bar : bars_) {
    const double rowY = devices - bar.row;
    // A few pixels of slack so very short stages can still be hovered.
    const double slack = std::abs(plot_->xAxis->pixelToCoord(4) - plot_->xAxis->pixelToCoord(0));
    if (std::abs(y - rowY) <= 0.32 && x >= bar.startMs - slack && x <= bar.endMs + slack) {
      QToolTip::showText(event->globalPosition().toPoint(), bar.text, plot_);
      return;
    }
  }
  QToolTip::hideText();
}

QList<Page::Shot> TimelinePage::screenshots() {
  return {Shot{QString(), [this](std::function<void()> done) {
    EngineController* e = context()->engine();
    if (!e || !e->lastCompleted().isEmpty()) {
      refresh();
      return done();
    }
    // Run an iteration first; done after it completed or failed.
    auto* c1 = new QMetaObject::Connection;
    auto* c2 = new QMetaObject::Connection;
    auto finish = [c1, c2, done, this] {
      QObject::disconnect(*c1);
      QObject::disconnect(*c2);
      delete c1;
      delete c2;
      refresh();
      done();
    };
    *c1 = connect(e, &EngineController::iterationCompleted, this, finish);
    *c2 = connect(e, &EngineController::engineError, this, finish);
    e->requestIteration();
  }}};
}

}  // namespace gui
