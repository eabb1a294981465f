#include "gui/memory/charts.h"

#include <QEvent>
#include <QGridLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>

#include "gui/common/chart_style.h"
#include "gui/memory/memory_parts.h"
#include "gui/runtime/engine_types.h"

namespace gui {

namespace {

using dpv::course::MemoryComparison;
using dpv::course::StrategyMemory;

// The unit of the shared value axis: bytes, KiB or MiB, by the largest bar.
struct Unit {
  double divisor = 1;
  QString name;
};

Unit unitFor(int64_t largest) {
  if (largest >= 10 * 1024 * 1024) return {1024.0 * 1024.0, MemoryCharts::tr("MiB")};
  if (largest >= 10 * 1024) return {1024.0, MemoryCharts::tr("KiB")};
  return {1.0, MemoryCharts::tr("bytes")};
}

// The largest total any rank holds after any stage of any strategy: the shared axis' top.
int64_t largestTotal(const MemoryComparison& c) {
  int64_t largest = 0;
  for (const StrategyMemory& s : c.strategies)
    for (const auto& sample : s.samples)
      for (const dpv::MemoryBreakdown& m : sample.ranks) largest = std::max(largest, m.total());
  return largest;
}

// A stage's tick: the short stage title, with its layer ("Forward 2").
QString stageTick(const dpv::Stage& stage) {
  QString text = stageShortTitle(stage.kind);
  if (stage.layer >= 0) text += QLatin1Char(' ') + QString::number(stage.layer);
  return text;
}

// Whether any strategy's rank holds bytes of `part` after any stage: parts no one holds are left
// out of the bars and the legend.
bool anyBytes(const MemoryComparison& c, const BreakdownPart& part) {
  for (const StrategyMemory& s : c.strategies)
    for (const auto& sample : s.samples)
      for (const dpv::MemoryBreakdown& m : sample.ranks)
        if (m.*part.bytes != 0) return true;
  return false;
}

}  // namespace

MemoryCharts::MemoryCharts(QWidget* parent) : QWidget(parent) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  outer->setSpacing(4);
  legend_ = new QLabel(this);
  legend_->setObjectName(QStringLiteral("memoryLegend"));
  legend_->setTextFormat(Qt::RichText);
  legend_->setWordWrap(true);
  outer->addWidget(legend_);
  grid_ = new QGridLayout();
  grid_->setContentsMargins(0, 0, 0, 0);
  grid_->setSpacing(6);
  outer->addLayout(grid_, 1);
  for (int i = 0; i < kStrategies; ++i) {
    auto* plot = new QCustomPlot(this);
    plot->setObjectName(QStringLiteral("memoryChart%1").arg(i));
    plot->setMinimumSize(200, 260);
    plot->plotLayout()->insertRow(0);
    plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, QString(), QFont(font().family(), font().pointSize(), QFont::Bold)));
    plot->setInteractions(QCP::iSelectPlottables);
    connect(plot, &QCustomPlot::plottableClick, this, [this, i](QCPAbstractPlottable* bars, int dataIndex, QMouseEvent*) {
      // The bars hold one point per stage, in plan order: the point's key is the stage's index.
      if (auto* b = qobject_cast<QCPBars*>(bars); b && dataIndex >= 0 && dataIndex < b->data()->size())
        emit stageClicked(i, static_cast<int>(b->data()->at(dataIndex)->key));
    });
    plots_[static_cast<size_t>(i)] = plot;
  }
  arrange(4);
  clear();
}

// Four charts a row while each keeps about 16 px per stage beside its value axis (the stage
// names, turned upright, stay apart) and 230 px at least, else two rows of two.
int MemoryCharts::columnsFor(int width) const { return width >= 4 * std::max(230, 80 + 16 * stages_) ? 4 : 2; }

bool MemoryCharts::arrange(int columns) {
  if (columns == columns_) return false;
  columns_ = columns;
  for (QCustomPlot* plot : plots_) grid_->removeWidget(plot);
  for (int i = 0; i < kStrategies; ++i) grid_->addWidget(plots_[static_cast<size_t>(i)], i / columns, i % columns);
  return true;
}

void MemoryCharts::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  if (arrange(columnsFor(width())) && shown_) show(shown_, rank_);  // the unit's label moves with the rows
}

void MemoryCharts::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange) applyTheme();
}

QString MemoryCharts::theme() const {
  return bnlab_chart_colours(palette()).dark ? QStringLiteral("dark") : QStringLiteral("light");
}

void MemoryCharts::style(QCustomPlot* plot, const QString& title) {
  bnlab_style_plot(plot, palette());
  if (auto* heading = qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0))) {
    heading->setText(title);
    heading->setTextColor(palette().color(QPalette::Text));
  }
}

void MemoryCharts::applyTheme() {
  if (shown_) {
    show(shown_, rank_);
    return;
  }
  clear();
}

void MemoryCharts::clear() {
  shown_.reset();
  legend_->setText(tr("Press “Run” to measure every rank's memory under DDP and the three ZeRO stages."));
  for (int i = 0; i < kStrategies; ++i) {
    QCustomPlot* p = plots_[static_cast<size_t>(i)];
    p->clearPlottables();
    p->legend->setVisible(false);
    style(p, QString::fromLatin1(dpv::strategy_short_name(static_cast<dpv::StrategyKind>(
                 static_cast<int>(dpv::StrategyKind::DistributedDataParallel) + i))));
    p->replot();
  }
}

QString MemoryCharts::legendText() const { return legend_->text(); }

void MemoryCharts::show(const MemoryResult& result, int rank) {
  if (!result) return clear();
  shown_ = result;
  const MemoryComparison& c = *result;
  rank_ = rank;
  const QString colourTheme = theme();
  const int64_t largest = largestTotal(c);
  const Unit unit = unitFor(largest);
  stages_ = 0;
  for (const StrategyMemory& s : c.strategies) stages_ = std::max(stages_, static_cast<int>(s.samples.size()));
  arrange(columnsFor(width()));
  QStringList legend;
  for (const BreakdownPart& part : breakdownParts())
    if (anyBytes(c, part))
      legend << QStringLiteral("<span style=\"color:%1\">■</span>&nbsp;%2").arg(breakdownPartColour(part, colourTheme).name(), part.name);
  legend_->setText(tr("Rank %1's bytes after each stage of the second iteration: ").arg(rank) + legend.join(QStringLiteral(" &nbsp; ")));
  for (int i = 0; i < kStrategies; ++i) {
    QCustomPlot* p = plots_[static_cast<size_t>(i)];
    p->clearPlottables();
    if (static_cast<size_t>(i) >= c.strategies.size()) continue;
    const StrategyMemory& s = c.strategies[static_cast<size_t>(i)];
    const auto r = static_cast<size_t>(rank);
    const int64_t peak = r < s.peak_total.size() ? s.peak_total[r] : 0;
    const int peakSample = r < s.peak_sample.size() ? s.peak_sample[r] : -1;
    const QString peakAt = peakSample >= 0 && static_cast<size_t>(peakSample) < s.samples.size()
                               ? tr(" after %1").arg(stageTick(s.samples[static_cast<size_t>(peakSample)].stage))
                               : QString();
    style(p, tr("%1 · peak %2%3").arg(QString::fromLatin1(dpv::strategy_short_name(s.strategy)), exactBytes(peak), peakAt));
    auto ticks = QSharedPointer<QCPAxisTickerText>(new QCPAxisTickerText);
    for (size_t x = 0; x < s.samples.size(); ++x) ticks->addTick(static_cast<double>(x), stageTick(s.samples[x].stage));
    p->xAxis->setTicker(ticks);
    p->xAxis->setTickLabelRotation(-90);
    p->xAxis->grid()->setVisible(false);
    p->xAxis->setRange(-0.6, static_cast<double>(s.samples.size()) - 0.4);
    p->yAxis->setLabel(i % columns_ == 0 ? unit.name : QString());  // on the left of each row
    QCPBars* below = nullptr;
    for (const BreakdownPart& part : breakdownParts()) {
      if (!anyBytes(c, part)) continue;
      auto* bars = new QCPBars(p->xAxis, p->yAxis);
      bars->setObjectName(part.name);
      bars->setName(part.name);
      bars->setBrush(breakdownPartColour(part, colourTheme));
      bars->setPen(Qt::NoPen);
      bars->setWidth(0.8);
      if (below) bars->moveAbove(below);
      below = bars;
      for (size_t x = 0; x < s.samples.size(); ++x) {
        const auto& ranks = s.samples[x].ranks;
        if (static_cast<size_t>(rank) < ranks.size())
          bars->addData(static_cast<double>(x), static_cast<double>(ranks[static_cast<size_t>(rank)].*part.bytes) / unit.divisor);
      }
    }
    p->legend->setVisible(false);  // one legend above the four, in the same colours
    p->yAxis->setRange(0, std::max<double>(1.0, static_cast<double>(largest) / unit.divisor * 1.05));
    p->replot();
  }
}

}  // namespace gui
