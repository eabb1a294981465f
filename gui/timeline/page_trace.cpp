// The Timeline page showing a Chrome trace read from a file (File > Open trace).
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QScrollArea>
#include <QTableWidget>
#include <algorithm>
#include <map>

#include "engine/error.h"
#include "gui/common/context.h"
#include "engine/io/input_file.h"
#include "gui/common/theme.h"
#include "gui/common/scene_model.h"
#include "gui/timeline/bars.h"
#include "gui/timeline/page.h"

namespace gui {

QString TimelinePage::openTrace(const QString& path, const QString& command) {
  try {
    // The checked read: a FIFO or a device is refused at once (it froze the window), a file over the
    // trace limit before any byte is read.
    const std::string bytes = dpv::read_file(path.toStdString(), dpv::kTraceInput);
    opened_ = dpv::read_trace_lanes(bytes, QFileInfo(path).fileName().toStdString());
  } catch (const dpv::Error& e) {
    return QString::fromStdString(e.what());
  }
  openedPath_ = path;
  openedCommand_ = command;
  series_.reset();  // the trace replaces a measured series until the next measurement
  refresh();
  return QString();
}

void TimelinePage::drawOpenedTrace() {
  const dpv::TraceLanes& t = *opened_;
  const int lanes = static_cast<int>(t.lanes.size());
  const double endMs = drawLanes(t);
  if (!openedCommand_.isEmpty()) {
    // A run as processes: every number here is read from the ranks' merged trace.
    const bool gpus = openedCommand_.contains(QLatin1String("--backend nccl"));
    const unsigned cores = dpv::course::host_cpu_count();
    const QString sharing = !gpus && cores > 0 && t.processes > static_cast<int>(cores)
                                ? tr(" %1 processes share %2 CPU cores, so they take turns and wait for each other in the collectives.")
                                      .arg(t.processes).arg(cores)
                                : QString();
    summary_->setText(tr("<b>Ran as %1 processes</b> (%2 lanes, %3 spans over %4 ms of trace). Each rank is its own "
                         "process with its own memory; under each rank's compute lane is its communication lane, where "
                         "its bucket all-reduces ran over %5.%6 Press “Run one iteration” to go back to the in-process threads.")
                          .arg(t.processes).arg(lanes).arg(t.spans.size()).arg(endMs, 0, 'f', 3)
                          .arg(gpus ? tr("NCCL") : tr("Gloo on 127.0.0.1"), sharing));
    summary_->setToolTip(openedCommand_);
    return;
  }
  summary_->setText(tr("<b>Opened trace</b> %1: %2 process%3, %4 lane%5, %6 span%7 over %8 ms. "
                       "Each process of a merged trace is one rank; press “Run one iteration” to go back to the engine's iterations.")
                        .arg(QFileInfo(openedPath_).fileName().toHtmlEscaped())
                        .arg(t.processes).arg(t.processes == 1 ? QString() : QStringLiteral("es"))
                        .arg(lanes).arg(lanes == 1 ? QString() : QStringLiteral("s"))
                        .arg(t.spans.size()).arg(t.spans.size() == 1 ? QString() : QStringLiteral("s"))
                        .arg(endMs, 0, 'f', 3));
}

double TimelinePage::drawLanes(const dpv::TraceLanes& t) {
  const QString theme = context()->theme();
  const int lanes = static_cast<int>(t.lanes.size());
  emptyHint_->setVisible(lanes == 0);
  plotScroll_->setVisible(lanes > 0);
  // Rows from the top: lane 0 (rank 0's first track) first.
  QStringList rows;
  for (const dpv::TraceLane& lane : t.lanes) {
    rows << QStringLiteral("%1 · %2").arg(QString::fromStdString(lane.process_label), QString::fromStdString(lane.thread_label));
  }
  setRows(rows);
  plot_->xAxis->setLabel(tr("time in the trace (ms)"));

  double endMs = 0;
  std::map<int, double> firstStartUs;  // the legend lists what is drawn, in the order it first ran
  bool allReduce = false;
  for (const dpv::TraceSpan& span : t.spans) {
    int kind = -1;
    for (int k = 0; k <= static_cast<int>(dpv::StageKind::Finalize); ++k)
      if (span.category == dpv::stage_kind_name(static_cast<dpv::StageKind>(k))) kind = k;
    if (kind >= 0 && (!firstStartUs.count(kind) || span.start_us < firstStartUs[kind])) firstStartUs[kind] = span.start_us;
    allReduce |= span.category == "allreduce";
    const double s = span.start_us / 1e3, e = (span.start_us + span.duration_us) / 1e3;
    drawTimelineBar(plot_, rows_ - 1 - span.lane, s, e, kind >= 0 ? stageColor(kind, theme) : sceneColors(theme).subtext);
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
      const QStringList cells = {QStringLiteral("%1 (%2)").arg(QString::fromStdString(span.name), QString::fromStdString(lane.process_label)),
                                 r.value(QStringLiteral("op")).toString(), QString::number(r.value(QStringLiteral("ranks")).toInt()),
                                 formatBytes(r.value(QStringLiteral("bytes")).toDouble()),
                                 QString::number(r.value(QStringLiteral("seconds")).toDouble() * 1e6, 'f', 1),
                                 QString::number(r.value(QStringLiteral("algbw_GBps")).toDouble(), 'f', 3),
                                 QString::number(r.value(QStringLiteral("busbw_GBps")).toDouble(), 'f', 3)};
      for (int col = 0; col < cells.size(); ++col) table_->setItem(row, col, new QTableWidgetItem(cells[col]));
    }
  }
  plot_->xAxis->setRange(0, endMs > 0 ? endMs * 1.03 : 1.0);
  legendKinds_.clear();
  for (const auto& [kind, start] : firstStartUs) legendKinds_ << kind;
  std::stable_sort(legendKinds_.begin(), legendKinds_.end(), [&](int a, int b) { return firstStartUs[a] < firstStartUs[b]; });
  legendAllReduce_ = allReduce;
  showLegend();
  return endMs;
}

}  // namespace gui
