// The Timeline page's measured series: several iterations timed off the GUI thread by the course
// (course/timeline_series.h), drawn as each stage's median with its spread; the speed-up against
// one device and the cores note are the engine's numbers, shown as they come.
#include <cmath>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QTableWidget>
#include <algorithm>
#include <map>

#include "engine/error.h"
#include "gui/common/context.h"
#include "gui/common/theme.h"
#include "gui/common/scene_model.h"
#include "gui/runtime/engine_controller.h"
#include "gui/runtime/engine_worker.h"
#include "gui/runtime/run_off_thread.h"
#include "gui/runtime/run_spec_from_settings.h"
#include "gui/timeline/bars.h"
#include "gui/timeline/page.h"

namespace gui {

namespace {

struct Measurement {
  std::optional<dpv::course::TimelineSeries> series;
  QString error;
};

QString msText(const dpv::course::Spread& s) {
  return QCoreApplication::translate("gui::TimelinePage", "median %1 ms (min %2, max %3)")
      .arg(s.median * 1e3, 0, 'f', 3).arg(s.min * 1e3, 0, 'f', 3).arg(s.max * 1e3, 0, 'f', 3);
}

}  // namespace

bool TimelinePage::measuring() const { return runner_->busy(); }

void TimelinePage::measure() {
  if (!context()->engine() || runner_->busy()) {
    emit measured(false);
    return;
  }
  const AppSettings settings = context()->settings();
  const quint64 generation = seriesGeneration_.next();
  measureButton_->setEnabled(false);
  summary_->setText(tr("Measuring %1 iterations of %2 on %3, then the same on one device …")
                        .arg(kMeasuredIterations)
                        .arg(QString::fromLatin1(dpv::strategy_name(runSpecFromSettings(settings).strategy)), settings.devices));
  std::shared_ptr<std::atomic<bool>> cancel = cancel_;
  runner_->run(
      [settings, cancel] {
        Measurement m;
        try {
          dpv::course::TimelineConfig config;
          config.run = runSpecFromSettings(settings);
          config.iterations = kMeasuredIterations;
          // The batch the Iteration page trains on, so both pages time the same work.
          const dpv::Dataset batch = makeBatchFor(settings.preset, settings.batchSize, settings.seed);
          m.series = dpv::course::measure_timeline(config, batch, [cancel] { return !cancel->load(); });
        } catch (const dpv::Error& e) {
          m.error = QString::fromStdString(e.full());
        } catch (const std::exception& e) {
          m.error = QString::fromStdString(e.what());
        }
        return m;
      },
      [this, generation](Measurement m) {
        measureButton_->setEnabled(true);
        if (!seriesGeneration_.isCurrent(generation)) return emit measured(false);  // the settings changed meanwhile
        opened_.reset();
        series_ = std::move(m.series);
        seriesError_ = m.error;
        refresh();
        if (!seriesError_.isEmpty()) summary_->setText(tr("<b>The measurement failed:</b> %1").arg(seriesError_.toHtmlEscaped()));
        emit measured(series_.has_value());
      });
}

QString TimelinePage::speedupText() const { return speedup_->isVisible() || series_ ? speedup_->text() : QString(); }

QString TimelinePage::coresNote() const { return cores_->isHidden() ? QString() : cores_->text(); }

void TimelinePage::showSeriesNumbers() {
  const dpv::course::TimelineSeries& s = *series_;
  QString speedup = tr("Speed-up against one device: %1×").arg(s.speedup, 0, 'f', 2);
  if (s.machine_speedup > 0)
    speedup += tr(" · %1% of this machine's limit (%2× for %3 independent workers, measured now)")
                   .arg(std::lround(100 * s.efficiency)).arg(s.machine_speedup, 0, 'f', 2).arg(s.device_count);
  speedup_->setText(speedup);
  speedup_->setToolTip(tr("One device: %1\n%2 devices: %3\nBoth measured by the engine on the same model, batch and starting weights.")
                           .arg(msText(s.one_device_total)).arg(s.device_count).arg(msText(s.total)));
  speedup_->setVisible(true);
  QString why;
  if (s.device_count > 1 && s.speedup < 1.0) {
    why = tr("Below 1×: the copies between devices cost more than the compute they share; a larger model or "
             "batch gains more.");
  }
  QString cores;
  const unsigned free = s.cores_for_devices();
  if (s.threads_share_cores() && s.cores_taken()) {
    cores = tr("<b>This machine cannot show a speed-up beyond %2×:</b> other programs kept %3 of its %4 CPU cores "
               "busy, so %1 simulated devices had %2 core%5 between them and their bars take turns instead of overlapping.")
                .arg(s.device_count).arg(free).arg(s.host_cores - free).arg(s.host_cores)
                .arg(free == 1 ? QString() : QStringLiteral("s"));
  } else if (s.threads_share_cores()) {
    cores = tr("<b>This machine cannot show a speed-up beyond %2×:</b> %1 simulated devices are threads sharing %2 CPU "
               "cores, so at most %2 compute at once and their bars take turns instead of overlapping.")
                .arg(s.device_count).arg(free);
  } else if (s.simulated) {
    cores = tr("%1 simulated device%2 on %3 free CPU cores: each thread has a core to itself.")
                .arg(s.device_count).arg(s.device_count == 1 ? QString() : QStringLiteral("s")).arg(free);
  }
  const QString note = QStringList{cores, why}.join(QLatin1Char(' ')).trimmed();
  cores_->setText(note);
  cores_->setVisible(!note.isEmpty());
}

void TimelinePage::drawSeries() {
  const dpv::course::TimelineSeries& s = *series_;
  const QString theme = context()->theme();
  emptyHint_->setVisible(s.stages.empty());
  plotScroll_->setVisible(!s.stages.empty());
  QStringList rows{tr("stages (wall)")};
  for (const dpv::course::DeviceTitle& device : s.device_titles) rows << QString::fromStdString(device.name);
  setRows(rows);
  plot_->xAxis->setLabel(tr("median time since the iteration began (ms), whiskers: min to max of %1 iterations").arg(s.totals.size()));
  plot_->yAxis->setLabel(QString());

  // Stages end to end by their median spans; inside a stage each device's bar starts at its median
  // offset and lasts its median busy time, with a whisker from its shortest to its longest.
  const QColor whisker = sceneColors(theme).text;
  double offsetMs = 0, endMs = 0;
  std::map<int, double> perKindMs;
  for (const dpv::course::TimedStage& stage : s.stages) {
    const int kind = static_cast<int>(stage.stage.kind);
    const QString title = QString::fromStdString(stage.stage.title);
    const double start = offsetMs, end = offsetMs + stage.span.median * 1e3;
    drawTimelineBar(plot_, rows_ - 1, start, end, stageColor(kind, theme));
    const double low = start + stage.span.min * 1e3, high = start + stage.span.max * 1e3;
    drawTimelineWhisker(plot_, rows_ - 1, low, high, whisker);
    bars_.append(Bar{0, start, end, kind, tr("%1\n%2 over %3 iterations").arg(title, msText(stage.span)).arg(s.totals.size()), low, high});
    perKindMs[kind] += stage.span.median * 1e3;
    endMs = std::max(endMs, high);
    for (const dpv::course::DeviceSpan& d : stage.devices) {
      const int row = 1 + d.device;
      if (row >= rows_) continue;
      const double ds = start + d.offset.median * 1e3, de = ds + d.busy.median * 1e3;
      const double dl = ds + d.busy.min * 1e3, dh = ds + d.busy.max * 1e3;
      drawTimelineBar(plot_, rows_ - 1 - row, ds, de, stageColor(kind, theme));
      drawTimelineWhisker(plot_, rows_ - 1 - row, dl, dh, whisker);
      bars_.append(Bar{row, ds, de, kind,
                       tr("%1 on %2\nbusy: %3\nstarted %4 ms after the stage began (median)")
                           .arg(title, rows.at(row), msText(d.busy)).arg(d.offset.median * 1e3, 0, 'f', 3),
                       dl, dh});
      endMs = std::max(endMs, dh);
    }
    offsetMs = end;
  }
  // One slow iteration (the OS preempting a thread) can stretch a whisker far to the right; the
  // axis stops at twice the median iteration so the bars stay legible (the hover text has the max).
  const double medianEndMs = offsetMs;
  const double rightMs = medianEndMs > 0 ? std::min(endMs, 2 * medianEndMs) : endMs;
  plot_->xAxis->setRange(0, rightMs > 0 ? rightMs * 1.03 : 1.0);
  for (const dpv::StageEvent& ev : s.median_events) addCollectiveRows(ev);

  QStringList parts;
  for (const auto& [kind, ms] : perKindMs) parts << QStringLiteral("%1 %2 ms").arg(stageShortTitle(static_cast<dpv::StageKind>(kind))).arg(ms, 0, 'f', 3);
  summary_->setText(tr("<b>%1 iterations of %2</b> (the Iteration page's mode) on %3 from the same weights and batch, "
                       "first stage to last: %4. Bars are medians; whiskers run from the fastest to the slowest iteration.%5")
                        .arg(s.totals.size())
                        .arg(QString::fromLatin1(dpv::strategy_name(s.config.run.strategy)),
                             QString::fromStdString(s.config.run.devices))
                        .arg(msText(s.total))
                        .arg(s.simulated ? tr(" Simulated devices are CPU threads: CPU times, not GPU times.") : QString()));
  summary_->setToolTip(tr("Median time per stage: %1").arg(parts.join(QStringLiteral(", "))));
  showSeriesNumbers();
}

}  // namespace gui
