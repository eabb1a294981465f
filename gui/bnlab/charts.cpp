// The BatchNorm lab's charts fed the lab's steps: the series names, the steps' values plotted, the
// titles, and the queued replots (charts_build.cpp builds and styles the plots).
#include "gui/bnlab/charts.h"

#include <QTimer>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "gui/common/chart_style.h"

namespace gui {

namespace {

// A chart title broken at its " · " separators so that every line fits `width` pixels (a title
// wider than its chart would be cut at both ends). Already broken titles are joined first.
QString wrapTitle(QString text, const QFont& font, int width) {
  const QString sep = QStringLiteral(" · ");
  const QStringList parts = text.replace(QLatin1Char('\n'), sep).split(sep);
  const QFontMetrics metrics(font);
  QStringList lines;
  QString line;
  for (const QString& part : parts) {
    const QString candidate = line.isEmpty() ? part : line + sep + part;
    if (!line.isEmpty() && metrics.horizontalAdvance(candidate) > width) {
      lines << line;
      line = part;
    } else {
      line = candidate;
    }
  }
  if (!line.isEmpty()) lines << line;
  return lines.join(QLatin1Char('\n'));
}

double floored_distance(double d) { return std::isfinite(d) ? std::max(d, BnLabCharts::kDistanceFloor) : d; }

QString model_short(BnLabModel m) {
  switch (m) {
    case BnLabPerDevice: return QStringLiteral("per-device BN");
    case BnLabSync: return QStringLiteral("SyncBN");
    case BnLabReference: return QStringLiteral("reference");
    case BnLabDdpPerRank: return QStringLiteral("DDP per-rank BN");
    case BnLabDdpSync: return QStringLiteral("DDP SyncBN");
  }
  return {};
}

// Value at `channel` of a per-channel vector, NaN when absent (a model that reported nothing).
double at_channel(const std::vector<double>& v, int channel) {
  return channel >= 0 && static_cast<size_t>(channel) < v.size() ? v[static_cast<size_t>(channel)]
                                                                 : std::numeric_limits<double>::quiet_NaN();
}

const BnLabLayerStats* layer_of(const BnLabModelStep& m, int slot) {
  return slot >= 0 && static_cast<size_t>(slot) < m.layers.size() ? &m.layers[static_cast<size_t>(slot)] : nullptr;
}

}  // namespace

QString BnLabCharts::chartId(Chart chart) {
  static const char* ids[] = {"batch-mean", "batch-var", "running-mean", "running-var", "loss", "accuracy", "distance"};
  return QString::fromLatin1(ids[chart]);
}

QString BnLabCharts::chartTitle(Chart chart) {
  switch (chart) {
    case BatchMean: return tr("Batch mean");
    case BatchVar: return tr("Batch variance");
    case RunningMean: return tr("Running mean");
    case RunningVar: return tr("Running variance");
    case Loss: return tr("Training loss");
    case Accuracy: return tr("Accuracy on the batch (%)");
    case Distance: return tr("Distance from the one-device reference");
  }
  return {};
}

// Legend entries are short so that two columns fit a chart at 1024x640; what each one means in
// full is in the chart's tooltip (seriesHelp).
QString BnLabCharts::chunkSeries(BnLabModel m) {
  if (m == BnLabDdpPerRank) return QStringLiteral("DDP: shard");
  return m == BnLabSync ? QStringLiteral("SyncBN: chunk") : QStringLiteral("per-device: chunk");
}
QString BnLabCharts::wholeSeries(BnLabModel m) {
  switch (m) {
    case BnLabPerDevice: return QStringLiteral("per-device: whole");
    case BnLabSync: return QStringLiteral("SyncBN: whole");
    case BnLabReference: return QStringLiteral("reference: whole");
    case BnLabDdpPerRank:
    case BnLabDdpSync: break;  // the same batch: the DataParallel lines already show it
  }
  return {};
}
QString BnLabCharts::runningSeries(BnLabModel m) { return model_short(m); }
QString BnLabCharts::device0EmaSeries() { return QStringLiteral("GPU 0's chunks"); }
QString BnLabCharts::lossSeries(BnLabModel m) { return model_short(m); }
QString BnLabCharts::accuracySeries(BnLabModel m) { return model_short(m) + QStringLiteral(" accuracy"); }
QString BnLabCharts::paramDistanceSeries(BnLabModel m) { return model_short(m); }  // a line; the gradients dots
QString BnLabCharts::gradDistanceSeries(BnLabModel m) { return model_short(m) + QStringLiteral(": gradients"); }

QString BnLabCharts::seriesHelp(Chart chart) {
  switch (chart) {
    case BatchMean:
    case BatchVar:
      return tr("Bars: each device's chunk statistic. Per-device BatchNorm normalises its chunk with it; for SyncBN it is "
                "only the chunk's local part; DDP: each rank's shard (DistributedSampler, padded).\n"
                "Lines: the whole batch's statistic. SyncBN normalises with it; per-device BatchNorm never uses it; the "
                "reference computes it on one device.");
    case RunningMean:
    case RunningVar:
      return tr("The running statistic each model keeps (DDP: rank 0's). \"GPU 0's chunks\": the running statistic "
                "rebuilt from GPU 0's chunks alone with BatchNorm's update rule; it lies on the per-device curve because "
                "only replica 0's buffers survive a DataParallel forward.");
    case Loss: return tr("Each model's training loss on the step's batch, before the update (DDP's dash-dot: the mean of the ranks').");
    case Accuracy: return tr("The fraction of the step's batch each model classified right, before the update (DDP's dash-dot: over the ranks' shards).");
    case Distance:
      return tr("The largest difference from the one-device reference: lines, the parameters after the step (DDP's "
                "dash-dot); dots, the gradients of the step. Exact zeros are drawn at 1e-12.");
  }
  return {};
}

void BnLabCharts::clear(int deviceCount, const std::vector<int64_t>& expectedChunks) {
  deviceCount_ = std::max(1, deviceCount);
  expectedChunks_ = expectedChunks;
  history_.clear();
  latest_ = BnLabStep{};
  for (auto* plot : plots_)
    for (int i = 0; i < plot->plottableCount(); ++i) {
      if (auto* g = qobject_cast<QCPGraph*>(plot->plottable(i))) g->data()->clear();
      if (auto* b = qobject_cast<QCPBars*>(plot->plottable(i))) b->data()->clear();
    }
  for (Chart c : {RunningMean, RunningVar, Loss, Accuracy, Distance}) plots_[c]->xAxis->setRange(0, 10);
  for (Chart c : {RunningMean, RunningVar, Loss}) plots_[c]->yAxis->setRange(0, 1);
  plots_[Accuracy]->yAxis->setRange(0, 100);
  plots_[Distance]->yAxis->setRange(1e-9, 1);
  for (auto* note : emptyNotes_) note->setVisible(true);
  updateBatchCharts();
  updateTitles();
  markDirty();
}

void BnLabCharts::setSelection(int layerSlot, int channel, const QString& layerTitle) {
  layerSlot_ = std::max(0, layerSlot);
  channel_ = std::max(0, channel);
  layerTitle_ = layerTitle;
  rebuildRunningCharts();
  updateBatchCharts();
  updateTitles();
  markDirty();
}

void BnLabCharts::appendSteps(const QVector<BnLabStep>& steps) {
  if (steps.isEmpty()) return;
  for (const BnLabStep& step : steps) {
    // Only the newest step's per-chunk statistics are drawn; older ones are dropped to keep
    // long runs small (the running statistics, loss and distances stay for every step).
    if (!history_.empty())
      for (auto& m : history_.back().models)
        for (auto& layer : m.layers) {
          layer.chunks.clear();
          layer.chunks.shrink_to_fit();
        }
    history_.push_back(step);
    appendRunningPoint(step);
    const double x = static_cast<double>(step.step);
    for (int m = 0; m < kBnLabModelCount; ++m) {
      const BnLabModelStep& ms = step.models[static_cast<size_t>(m)];
      lossGraphs_[m]->addData(x, ms.loss);
      accuracyGraphs_[m]->addData(x, 100.0 * ms.accuracy);
    }
    for (BnLabModel m : kComparedModels) {
      paramDistanceGraphs_[m]->addData(x, floored_distance(step.models[static_cast<size_t>(m)].paramDistance));
      gradDistanceGraphs_[m]->addData(x, floored_distance(step.models[static_cast<size_t>(m)].gradDistance));
    }
  }
  latest_ = steps.back();
  for (auto* note : emptyNotes_) note->setVisible(false);

  const double lastX = static_cast<double>(latest_.step);
  for (Chart c : {RunningMean, RunningVar, Loss, Accuracy, Distance}) {
    QCustomPlot* plot = plots_[c];
    plot->xAxis->setRange(0, std::max(10.0, lastX));
    if (c == Distance || c == Accuracy) continue;  // fixed ranges: decades, and 0 to 100 %  // a fixed decade range reads better than a jumping one; see below
    bool found = false;
    QCPRange range;
    for (int i = 0; i < plot->graphCount(); ++i) {
      QCPGraph* g = plot->graph(i);
      if (g->valueAxis() != plot->yAxis) continue;
      bool ok = false;
      const QCPRange r = g->getValueRange(ok);
      if (!ok) continue;
      range = found ? QCPRange(std::min(range.lower, r.lower), std::max(range.upper, r.upper)) : r;
      found = true;
    }
    if (found) {
      const double pad = std::max(1e-6, 0.06 * range.size());
      plot->yAxis->setRange(range.lower - pad, range.upper + pad);
    }
  }
  // Distance: whole decades from the smallest to the largest value plotted.
  {
    double lo = 1.0, hi = 1e-9;
    for (int i = 0; i < plots_[Distance]->graphCount(); ++i) {
      bool ok = false;
      const QCPRange r = plots_[Distance]->graph(i)->getValueRange(ok, QCP::sdPositive);
      if (!ok) continue;
      lo = std::min(lo, r.lower);
      hi = std::max(hi, r.upper);
    }
    plots_[Distance]->yAxis->setRange(std::pow(10.0, std::floor(std::log10(lo))),
                                      std::pow(10.0, std::ceil(std::log10(hi)) + 0.3));
  }
  updateBatchCharts();
  updateTitles();
  markDirty();
}

void BnLabCharts::appendRunningPoint(const BnLabStep& step) {
  const double x = static_cast<double>(step.step);
  for (int m = 0; m < kBnLabModelCount; ++m) {
    const BnLabLayerStats* layer = layer_of(step.models[static_cast<size_t>(m)], layerSlot_);
    if (!layer) continue;
    runningGraphs_[0][m]->addData(x, at_channel(layer->runningMean, channel_));
    runningGraphs_[1][m]->addData(x, at_channel(layer->runningVar, channel_));
    if (m == BnLabPerDevice) {
      emaGraphs_[0]->addData(x, at_channel(layer->device0EmaMean, channel_));
      emaGraphs_[1]->addData(x, at_channel(layer->device0EmaVar, channel_));
    }
  }
}

void BnLabCharts::rebuildRunningCharts() {
  for (int s = 0; s < 2; ++s) {
    for (auto* g : runningGraphs_[s]) g->data()->clear();
    emaGraphs_[s]->data()->clear();
  }
  for (const BnLabStep& step : history_) appendRunningPoint(step);
  for (Chart c : {RunningMean, RunningVar})
    if (!history_.empty()) {
      plots_[c]->yAxis->rescale();
      const QCPRange r = plots_[c]->yAxis->range();
      const double pad = std::max(1e-6, 0.06 * r.size());
      plots_[c]->yAxis->setRange(r.lower - pad, r.upper + pad);
    }
}

void BnLabCharts::updateBatchCharts() {
  // Device ticks: every device of the set, idle ones marked, so fewer chunks than devices shows;
  // the rows under the name, so eight devices still fit a narrow chart.
  const std::vector<int64_t>& chunks = history_.empty() ? expectedChunks_ : latest_.chunks;
  auto ticker = QSharedPointer<QCPAxisTickerText>(new QCPAxisTickerText);
  // A DDP shard that differs from the DataParallel chunk (the sampler pads) is named beside it.
  const std::vector<int64_t>& shards = history_.empty() ? std::vector<int64_t>{} : latest_.shards;
  for (int d = 0; d < deviceCount_; ++d) {
    const bool active = static_cast<size_t>(d) < chunks.size();
    QString tick = active && chunks[static_cast<size_t>(d)] > 0 ? tr("GPU %1\n%2").arg(d).arg(chunks[static_cast<size_t>(d)])
                                                                : tr("GPU %1\nidle").arg(d);
    if (static_cast<size_t>(d) < shards.size() && (!active || shards[static_cast<size_t>(d)] != chunks[static_cast<size_t>(d)]))
      tick = tr("GPU %1\n%2 · DDP %3").arg(d).arg(active ? chunks[static_cast<size_t>(d)] : 0).arg(shards[static_cast<size_t>(d)]);
    ticker->addTick(d, tick);
  }
  for (int s = 0; s < 2; ++s) {
    QCustomPlot* plot = plots_[s == 0 ? BatchMean : BatchVar];
    plot->xAxis->setTicker(ticker);
    plot->xAxis->setRange(-0.6, deviceCount_ - 0.4);
    double lo = 0, hi = 0;  // bars start at zero, so the range always holds it
    auto take = [&](double v) {
      if (!std::isfinite(v)) return;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    };
    for (size_t b = 0; b < kBarModels.size(); ++b) {
      chunkBars_[s][b]->data()->clear();
      const BnLabLayerStats* layer = layer_of(latest_.models[static_cast<size_t>(kBarModels[b])], layerSlot_);
      if (!layer) continue;
      for (const auto& chunk : layer->chunks) {
        const double v = at_channel(s == 0 ? chunk.mean : chunk.var, channel_);
        chunkBars_[s][b]->addData(chunk.device, v);
        take(v);
      }
    }
    for (int m = 0; m < kBnLabDpModelCount; ++m) {
      wholeLines_[s][m]->data()->clear();
      const BnLabLayerStats* layer = layer_of(latest_.models[static_cast<size_t>(m)], layerSlot_);
      if (!layer) continue;
      const double v = at_channel(s == 0 ? layer->whole.mean : layer->whole.var, channel_);
      wholeLines_[s][m]->addData(-0.5, v);
      wholeLines_[s][m]->addData(deviceCount_ - 0.5, v);
      take(v);
    }
    if (hi - lo <= 0) hi = 1;  // nothing plotted yet
    const double pad = std::max(1e-6, 0.08 * (hi - lo));
    plot->yAxis->setRange(lo - (lo < 0 ? pad : 0), hi + pad);
  }
}

void BnLabCharts::updateTitles() {
  const QString where = layerTitle_.isEmpty() ? QString() : tr(" · %1 · channel %2").arg(layerTitle_).arg(channel_);
  const QString when = history_.empty() ? tr(" · no step yet") : tr(" · step %1").arg(latest_.step);
  titles_[BatchMean]->setText(chartTitle(BatchMean) + where + when);
  titles_[BatchVar]->setText(chartTitle(BatchVar) + where + when);
  titles_[RunningMean]->setText(chartTitle(RunningMean) + where);
  titles_[RunningVar]->setText(chartTitle(RunningVar) + where);
  wrapTitles();
}

void BnLabCharts::wrapTitles() {
  for (int c = 0; c < static_cast<int>(titles_.size()); ++c)
    if (titles_[c] && plots_[c]) titles_[c]->setText(wrapTitle(titles_[c]->text(), titles_[c]->font(), plots_[c]->width() - 12));
}

void BnLabCharts::markDirty() {
  dirty_.fill(true);
  if (!replotTimer_->isActive()) replotTimer_->start();
}

void BnLabCharts::replotNextDirty() {
  for (int i = 0; i < kChartCount; ++i) {
    const int c = (nextReplot_ + i) % kChartCount;
    if (!dirty_[c]) continue;
    dirty_[c] = false;
    nextReplot_ = (c + 1) % kChartCount;
    plots_[c]->replot(QCustomPlot::rpQueuedReplot);
    return;
  }
  replotTimer_->stop();
}

void BnLabCharts::replotNow() {
  dirty_.fill(false);
  replotTimer_->stop();
  for (auto* plot : plots_) plot->replot(QCustomPlot::rpImmediateRefresh);
}

QStringList BnLabCharts::seriesNames(Chart chart) const {
  QStringList names;
  QCustomPlot* plot = plots_[chart];
  for (int i = 0; i < plot->plottableCount(); ++i) names << plot->plottable(i)->name();
  return names;
}

QVector<QPointF> BnLabCharts::seriesData(Chart chart, const QString& series) const {
  QVector<QPointF> points;
  QCustomPlot* plot = plots_[chart];
  for (int i = 0; i < plot->plottableCount(); ++i) {
    QCPAbstractPlottable* p = plot->plottable(i);
    if (p->name() != series) continue;
    QCPPlottableInterface1D* data = p->interface1D();
    if (!data) break;
    for (int k = 0; k < data->dataCount(); ++k) points.append(QPointF(data->dataMainKey(k), data->dataMainValue(k)));
    break;
  }
  return points;
}

}  // namespace gui
