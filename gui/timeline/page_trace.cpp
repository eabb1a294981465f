// The Timeline page showing a Chrome trace read from a file (File > Open trace, or the merged trace
// of a run as processes). A trace of a long run is hundreds of MB: it is read and parsed on a thread
// of its own (OffThreadRunner) while the page shows a notice with Cancel, and what is drawn is capped
// (kMaxDrawnLanes rows, kMaxDrawnSpans bars) with a notice, so a huge trace is never a blank chart.
#include <QFileInfo>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QStyle>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <map>

#include "engine/error.h"
#include "engine/io/input_file.h"
#include "gui/common/context.h"
#include "gui/common/scene_model.h"
#include "gui/common/theme.h"
#include "gui/runtime/run_off_thread.h"
#include "gui/timeline/bars.h"
#include "gui/timeline/page.h"

namespace gui {

namespace {

// What the loading thread hands back: the lanes, or why there are none.
struct TraceLoad {
  std::optional<dpv::TraceLanes> lanes;
  QString error;
};

void restyle(QLabel* label, const char* objectName) {
  if (label->objectName() == QLatin1String(objectName)) return;
  label->setObjectName(QLatin1String(objectName));
  label->style()->unpolish(label);
  label->style()->polish(label);
}

}  // namespace

void TimelinePage::buildTraceLoadRow(QVBoxLayout* layout) {
  traceRunner_ = new OffThreadRunner(this);
  auto* row = new QHBoxLayout();
  traceStatus_ = new QLabel(this);
  traceStatus_->setObjectName(QStringLiteral("notice"));
  traceStatus_->setWordWrap(true);
  traceStatus_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  traceStatus_->setVisible(false);
  traceCancelButton_ = new QPushButton(tr("Cancel loading"), this);
  traceCancelButton_->setObjectName(QStringLiteral("cancelTraceLoad"));
  traceCancelButton_->setToolTip(tr("Stops reading the trace; the chart keeps what it showed before"));
  traceCancelButton_->setVisible(false);
  row->addWidget(traceStatus_, 1);
  row->addWidget(traceCancelButton_, 0, Qt::AlignTop);
  layout->addLayout(row);
  drawCapNotice_ = new QLabel(this);
  drawCapNotice_->setObjectName(QStringLiteral("notice"));
  drawCapNotice_->setWordWrap(true);
  drawCapNotice_->setVisible(false);
  layout->addWidget(drawCapNotice_);
  connect(traceCancelButton_, &QPushButton::clicked, this, &TimelinePage::cancelTraceLoad);
}

bool TimelinePage::openTrace(const QString& path, const QString& command) {
  if (traceRunner_->busy()) return false;
  traceLoadCancel_ = std::make_shared<std::atomic<bool>>(false);
  const std::shared_ptr<std::atomic<bool>> cancel = traceLoadCancel_;
  const std::string file = path.toStdString();
  const std::string name = QFileInfo(path).fileName().toStdString();
  restyle(traceStatus_, "notice");
  traceStatus_->setText(tr("Reading the trace %1 (%2) …").arg(QFileInfo(path).fileName().toHtmlEscaped(),
                                                             formatBytes(static_cast<double>(QFileInfo(path).size()))));
  traceStatus_->setToolTip(path);
  traceStatus_->setVisible(true);
  traceCancelButton_->setVisible(true);
  traceCancelButton_->setEnabled(true);
  traceRunner_->run(
      [file, name, cancel] {
        TraceLoad load;
        try {
          // The checked read: a FIFO or a device is refused at once, a file over the trace limit
          // before any byte is read.
          const std::string bytes = dpv::read_file(file, dpv::kTraceInput);
          if (!cancel->load()) load.lanes = dpv::read_trace_lanes(bytes, name, [cancel] { return cancel->load(); });
        } catch (const dpv::Error& e) {
          load.error = QString::fromStdString(e.what());
        }
        return load;
      },
      [this, path, command, cancel](TraceLoad load) { onTraceLoaded(path, command, cancel->load(), std::move(load.lanes), load.error); });
  return true;
}

void TimelinePage::onTraceLoaded(const QString& path, const QString& command, bool cancelled,
                                 std::optional<dpv::TraceLanes> lanes, const QString& error) {
  traceCancelButton_->setVisible(false);
  if (cancelled) {
    // The flag, not the message, says it was cancelled: what was shown stays.
    traceStatus_->setText(tr("Loading %1 was cancelled; the chart shows what it showed before.").arg(QFileInfo(path).fileName().toHtmlEscaped()));
    emit traceLoadFinished(TraceLoadEnd::Cancelled, QString());
    return;
  }
  if (!lanes) {
    restyle(traceStatus_, "errorBanner");
    traceStatus_->setText(tr("<b>The trace cannot be shown:</b> %1").arg(error.toHtmlEscaped()));
    emit traceLoadFinished(TraceLoadEnd::Failed, error);
    return;
  }
  traceStatus_->setVisible(false);
  opened_ = std::move(lanes);
  openedPath_ = path;
  openedCommand_ = command;
  series_.reset();  // the trace replaces a measured series until the next measurement
  refresh();
  emit traceLoadFinished(TraceLoadEnd::Shown, QString());
}

void TimelinePage::cancelTraceLoad() {
  if (!traceRunner_->busy() || !traceLoadCancel_) return;
  traceLoadCancel_->store(true);  // the parser asks between tokens and stops within milliseconds
  traceCancelButton_->setEnabled(false);
  traceStatus_->setText(tr("Cancelling …"));
}

bool TimelinePage::loadingTrace() const { return traceRunner_->busy(); }

QString TimelinePage::traceStatus() const { return traceStatus_->isHidden() ? QString() : traceStatus_->text(); }

QString TimelinePage::drawCapText() const { return drawCapNotice_->isHidden() ? QString() : drawCapNotice_->text(); }

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
  // A chart row per lane stays readable up to a few dozen; 100,000 rows would be a plot taller than
  // any widget can be (it drew blank). The first lanes (rank 0's first) are drawn, and so many bars
  // at most: each is an item of the plot.
  const int drawnLanes = std::min(lanes, kMaxDrawnLanes);
  // Rows from the top: lane 0 (rank 0's first track) first.
  QStringList rows;
  for (int l = 0; l < drawnLanes; ++l) {
    const dpv::TraceLane& lane = t.lanes[static_cast<size_t>(l)];
    rows << QStringLiteral("%1 · %2").arg(QString::fromStdString(lane.process_label), QString::fromStdString(lane.thread_label));
  }
  setRows(rows);
  plot_->xAxis->setLabel(tr("time in the trace (ms)"));

  double endMs = 0;
  std::map<int, double> firstStartUs;  // the legend lists what is drawn, in the order it first ran
  bool allReduce = false;
  size_t drawnSpans = 0, spansOnDrawnLanes = 0;
  for (const dpv::TraceSpan& span : t.spans) {
    if (span.lane >= drawnLanes) continue;
    if (++spansOnDrawnLanes > static_cast<size_t>(kMaxDrawnSpans)) continue;
    ++drawnSpans;
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
    if (span.args.find("\"collectives\"") == std::string::npos) continue;
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
  showDrawCap(lanes, drawnLanes, t.spans.size(), spansOnDrawnLanes, drawnSpans);
  return endMs;
}

void TimelinePage::showDrawCap(int lanes, int drawnLanes, size_t spans, size_t spansOnDrawnLanes, size_t drawnSpans) {
  QString text;
  if (drawnLanes < lanes) text = tr("Showing the first %1 of %2 lanes").arg(drawnLanes).arg(lanes);
  if (drawnSpans < spansOnDrawnLanes) {
    text = text.isEmpty() ? tr("Showing the first %1 of %2 spans").arg(drawnSpans).arg(spansOnDrawnLanes)
                          : tr("%1, and the first %2 of their %3 spans").arg(text).arg(drawnSpans).arg(spansOnDrawnLanes);
  }
  drawCapNotice_->setVisible(!text.isEmpty());
  if (text.isEmpty()) return;
  drawCapNotice_->setText(tr("%1 (%2 spans in the whole trace): a chart of all of them would not be readable. "
                             "Open the file in Perfetto (ui.perfetto.dev) to see every lane.").arg(text).arg(spans));
}

}  // namespace gui
