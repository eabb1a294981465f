#include "gui/compare/charts.h"

#include <QEvent>
#include <QGridLayout>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "gui/common/theme.h"
#include "gui/common/chart_style.h"

namespace gui {

namespace {

using dpv::course::CompareResult;
using dpv::course::ModeRun;

struct ModeColours {
  QColor one, dp, ddp, compute, communication, replicate, text;
  bool dark = false;
};

ModeColours coloursFor(const QPalette& palette) {
  const BnLabChartColours c = bnlab_chart_colours(palette);
  ModeColours m;
  m.one = c.reference;
  m.dp = c.perDevice;
  m.ddp = c.sync;
  m.compute = c.text;
  m.compute.setAlpha(110);
  m.communication = c.device0;
  m.replicate = c.dark ? QColor(0xe8, 0xc5, 0x4a) : QColor(0xb8, 0x86, 0x0b);
  m.text = c.text;
  m.dark = c.dark;
  return m;
}

QColor faded(QColor c) {
  c.setAlpha(95);
  return c;
}

QCPGraph* line(QCustomPlot* plot, const QString& name, const QColor& colour, const std::vector<double>& y,
               Qt::PenStyle style = Qt::SolidLine, double width = 2.0) {
  QCPGraph* g = plot->addGraph();
  g->setName(name);
  g->setPen(QPen(colour, width, style));
  QVector<double> xs, ys;
  for (size_t i = 0; i < y.size(); ++i) {
    xs << static_cast<double>(i + 1);
    ys << y[i];
  }
  g->setData(xs, ys, true);
  return g;
}

QCPBars* bars(const QString& name, const QColor& colour, QCPAxis* key, QCPAxis* value, double width) {
  auto* b = new QCPBars(key, value);
  b->setName(name);
  b->setBrush(colour);
  b->setPen(Qt::NoPen);
  b->setWidth(width);
  return b;
}

// Raises a stacked-bar chart's value axis so the legend, inset at the top, ends above the highest
// bar (`barTop`, in axis units; 0: nothing to keep clear). Called after every layout, where the
// legend's height in pixels is known, so it holds at any chart size (a fixed headroom factor left
// the legend over the bars in a short chart, or wasted a tall one).
void raiseValueAxisAboveLegend(QCustomPlot* plot, double barTop) {
  const double axisHeight = plot->axisRect()->rect().height();
  if (!plot->legend->visible() || barTop <= 0 || axisHeight <= 0) return;
  if (plot->legend->layout() != plot->axisRect()->insetLayout()) return;  // below the axes: nothing to clear
  // The legend's bottom edge (it is inset with a margin below the axis top), and a gap of 6 px.
  const double legendShare = (plot->legend->outerRect().bottom() - plot->axisRect()->top() + 6) / axisHeight;
  const double upper = barTop / std::max(0.2, 1.0 - legendShare);
  if (std::abs(upper - plot->yAxis->range().upper) <= 1e-9 * upper) return;
  plot->yAxis->setRangeUpper(upper);
  // The layout already placed the ticks for the old range: place them again for this one.
  plot->axisRect()->update(QCPLayoutElement::upPreparation);
}

}  // namespace

const QList<MemoryChartPart>& memoryChartParts() {
  using K = dpv::MemoryKind;
  using dpv::course::ModeRun;
  static const QList<MemoryChartPart> parts = {
      {K::Parameters, CompareCharts::tr("parameters"), [](const ModeRun& r, size_t d) { return r.peak_parts[d].parameters; }},
      {K::Gradients, CompareCharts::tr("gradients"), [](const ModeRun& r, size_t d) { return r.peak_parts[d].gradients; }},
      {K::Buckets, CompareCharts::tr("DDP buckets"), [](const ModeRun& r, size_t d) { return r.peak_parts[d].buckets; }},
      {K::Optimizer, CompareCharts::tr("optimizer state"), [](const ModeRun& r, size_t d) { return r.peak_parts[d].optimizer; }},
      {K::Batch, CompareCharts::tr("batch"), [](const ModeRun& r, size_t d) { return r.peak_parts[d].batch; }},
      {K::Activations, CompareCharts::tr("activations"), [](const ModeRun& r, size_t d) { return r.peak_parts[d].activations; }},
      {K::Output, CompareCharts::tr("gathered output"), [](const ModeRun& r, size_t d) { return r.peak_parts[d].output; }},
      {std::nullopt, CompareCharts::tr("inside a stage"),
       [](const ModeRun& r, size_t d) { return d < r.stage_temporaries.size() ? r.stage_temporaries[d] : int64_t{0}; }},
  };
  return parts;
}

QString memoryBarsName(bool ddp, const QString& part) {
  return (ddp ? QStringLiteral("memory DDP ") : QStringLiteral("memory DP ")) + part;
}

QString CompareCharts::title(Chart chart) {
  switch (chart) {
    case Loss: return tr("Loss per iteration");
    case ParamDiff: return tr("Max |param − one device's|");
    case StepTime: return tr("Time per step (ms)");
    case Memory: return tr("Peak memory per GPU (kB)");
    case Bytes: return tr("Bytes sent per step (kB)");
    case Speedup: return tr("Speed-up against one device");
    case kChartCount: break;
  }
  return {};
}

CompareCharts::CompareCharts(QWidget* parent) : QWidget(parent) {
  auto* grid = new QGridLayout(this);
  grid->setContentsMargins(0, 0, 0, 0);
  grid->setSpacing(6);
  for (int i = 0; i < kChartCount; ++i) {
    auto* plot = new QCustomPlot(this);
    plot->setObjectName(QStringLiteral("compareChart%1").arg(i));
    plot->setMinimumSize(220, 190);
    plot->plotLayout()->insertRow(0);
    auto* heading = new QCPTextElement(plot, title(static_cast<Chart>(i)), QFont(font().family(), font().pointSize(), QFont::Bold));
    plot->plotLayout()->addElement(0, 0, heading);
    // Under the axes: an inset legend covered curves and bars in the small charts.
    place_legend_below(plot, 2);
    plots_[static_cast<size_t>(i)] = plot;
    connect(plot, &QCustomPlot::afterLayout, this,
            [this, plot, i] { raiseValueAxisAboveLegend(plot, barTop_[static_cast<size_t>(i)]); });
  }
  arrange(3);
  applyTheme();
}

// Three charts a row while each keeps about 250 px (its bold title whole), else two.
void CompareCharts::arrange(int columns) {
  if (columns == columns_) return;
  columns_ = columns;
  auto* grid = static_cast<QGridLayout*>(layout());
  for (QCustomPlot* plot : plots_) grid->removeWidget(plot);
  for (int i = 0; i < kChartCount; ++i) grid->addWidget(plots_[static_cast<size_t>(i)], i / columns, i % columns);
}

void CompareCharts::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  arrange(width() >= 3 * 250 ? 3 : 2);
}

void CompareCharts::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange) applyTheme();
}

void CompareCharts::style(QCustomPlot* plot) {
  bnlab_style_plot(plot, palette());
  if (auto* heading = qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0)))
    heading->setTextColor(palette().color(QPalette::Text));
}

void CompareCharts::applyTheme() {
  if (hasResult_) {
    showResult(result_);
    return;
  }
  for (QCustomPlot* p : plots_) {
    style(p);
    p->replot();
  }
}

void CompareCharts::clear() {
  hasResult_ = false;
  barTop_.fill(0);
  for (QCustomPlot* p : plots_) {
    p->clearPlottables();
    p->legend->setVisible(false);
    style(p);
    p->replot();
  }
}

namespace {

// Loss: the three curves, and what DDP's rank 0 alone would print.
void drawLoss(QCustomPlot* p, const CompareResult& r, const ModeColours& c) {
  line(p, CompareCharts::tr("one device"), c.one, r.one.loss, Qt::SolidLine, 3.0);
  line(p, CompareCharts::tr("DataParallel"), c.dp, r.dp.loss);
  line(p, CompareCharts::tr("DDP, ranks' mean"), c.ddp, r.ddp.loss, Qt::DashLine);
  line(p, CompareCharts::tr("DDP rank 0"), faded(c.ddp), r.ddp.rank0_loss, Qt::DotLine, 1.5);
  p->xAxis->setLabel(CompareCharts::tr("iteration"));
  p->legend->setVisible(true);
  p->rescaleAxes();
}

// Parameter difference against one device.
void drawParamDiff(QCustomPlot* p, const CompareResult& r, const ModeColours& c) {
  line(p, CompareCharts::tr("DataParallel"), c.dp, r.dp.max_param_diff);
  line(p, CompareCharts::tr("DDP"), c.ddp, r.ddp.max_param_diff, Qt::DashLine);
  p->xAxis->setLabel(CompareCharts::tr("iteration"));
  p->yAxis->setNumberFormat(QStringLiteral("gb"));
  p->legend->setVisible(true);
  p->rescaleAxes();
  if (p->yAxis->range().size() <= 0) p->yAxis->setRange(0, 1e-6);
}

// Time per step: stacked parts for the three modes (mean of the iterations after the first).
// Returns the top of its highest stacked bar.
double drawStepTime(QCustomPlot* p, const CompareResult& r, const ModeColours& c) {
  auto ticks = QSharedPointer<QCPAxisTickerText>(new QCPAxisTickerText);
  ticks->addTick(1, CompareCharts::tr("1 device"));  // short: three labels share a 250-pixel chart
  ticks->addTick(2, CompareCharts::tr("DP"));
  ticks->addTick(3, CompareCharts::tr("DDP"));
  p->xAxis->setTicker(ticks);
  p->xAxis->grid()->setVisible(false);
  auto* compute = bars(CompareCharts::tr("compute"), c.compute, p->xAxis, p->yAxis, 0.6);
  auto* comm = bars(CompareCharts::tr("communication"), c.communication, p->xAxis, p->yAxis, 0.6);
  auto* replicate = bars(CompareCharts::tr("replicate"), c.replicate, p->xAxis, p->yAxis, 0.6);
  comm->moveAbove(compute);
  replicate->moveAbove(comm);
  const ModeRun* runs[] = {&r.one, &r.dp, &r.ddp};
  for (int i = 0; i < 3; ++i) {
    compute->addData(i + 1, 1e3 * runs[i]->steady.compute);
    comm->addData(i + 1, 1e3 * runs[i]->steady.communication);
    replicate->addData(i + 1, 1e3 * runs[i]->steady.replicate);
  }
  p->legend->setVisible(true);
  p->rescaleAxes();
  p->xAxis->setRange(0.4, 3.6);
  p->yAxis->setRangeLower(0);
  return p->yAxis->range().upper;
}

// Memory per device by kind, stacked: DataParallel's bar left of each device, DDP's right, the
// parts the engine's snapshots report at the device's fullest stage boundary, and on top what
// lived only inside a stage. A kind neither mode holds is left out of the legend. Returns the top
// of its highest stacked bar.
double drawMemory(QCustomPlot* p, const CompareResult& r, const ModeColours& c, int world) {
  auto ticks = QSharedPointer<QCPAxisTickerText>(new QCPAxisTickerText);
  for (int d = 0; d < world; ++d) ticks->addTick(d, QStringLiteral("%1").arg(d));
  p->xAxis->setTicker(ticks);
  p->xAxis->setLabel(CompareCharts::tr("GPU: DP bar left, DDP right"));
  p->xAxis->grid()->setVisible(false);
  const SceneColors& kinds = sceneColors(c.dark ? QStringLiteral("dark") : QStringLiteral("light"));
  QCPBars* below[2] = {nullptr, nullptr};
  for (const MemoryChartPart& part : memoryChartParts()) {
    const ModeRun* runs[2] = {&r.dp, &r.ddp};
    bool any = false;
    for (const ModeRun* run : runs)
      for (size_t i = 0; i < run->peak_parts.size(); ++i) any = any || part.bytes(*run, i) > 0;
    if (!any) continue;
    const QColor colour = part.kind ? kinds.memoryFor(*part.kind) : faded(c.text);
    for (int m = 0; m < 2; ++m) {
      auto* b = bars(part.name, colour, p->xAxis, p->yAxis, 0.36);
      b->setObjectName(memoryBarsName(m == 1, part.name));
      if (m == 1) {
        b->setPen(QPen(c.ddp, 1));  // DDP's bars outlined in DDP's colour
        b->removeFromLegend();
      }
      if (below[m]) b->moveAbove(below[m]);
      below[m] = b;
      for (int d = 0; d < world; ++d)
        if (static_cast<size_t>(d) < runs[m]->peak_parts.size())
          b->addData(d + (m == 0 ? -0.2 : 0.2), part.bytes(*runs[m], static_cast<size_t>(d)) / 1e3);
    }
  }
  // Up to eight kinds in a narrow chart: a smaller legend font, and room above the bars for it.
  QFont small = p->legend->font();
  small.setPointSizeF(small.pointSizeF() * 0.8);
  p->legend->setFont(small);
  p->legend->setRowSpacing(-2);
  // Two columns: half the rows, so the bars below it stay clear. The wrap first: only a change
  // of fill order re-arranges the entries already there.
  p->legend->setWrap(2);
  p->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);
  p->legend->setVisible(true);
  p->rescaleAxes();
  p->xAxis->setRange(-0.6, world - 0.4);
  p->yAxis->setRangeLower(0);
  return p->yAxis->range().upper;
}

// Bytes per step, one bar per transfer, coloured by mode.
void drawBytes(QCustomPlot* p, const CompareResult& r, const ModeColours& c) {
  auto ticks = QSharedPointer<QCPAxisTickerText>(new QCPAxisTickerText);
  auto* dp = bars(CompareCharts::tr("DataParallel"), c.dp, p->yAxis, p->xAxis, 0.7);
  auto* ddp = bars(CompareCharts::tr("DDP"), c.ddp, p->yAxis, p->xAxis, 0.7);
  double row = 0;
  for (const auto& b : r.ddp.bytes) {
    ticks->addTick(row, CompareCharts::tr("DDP: %1").arg(QString::fromStdString(b.what)));
    ddp->addData(row++, b.bytes / 1e3);
  }
  for (const auto& b : r.dp.bytes) {
    ticks->addTick(row, CompareCharts::tr("DP: %1").arg(QString::fromStdString(b.what)));
    dp->addData(row++, b.bytes / 1e3);
  }
  p->yAxis->setTicker(ticks);
  p->yAxis->grid()->setVisible(false);
  p->legend->setVisible(false);  // the row labels say DP or DDP
  p->xAxis->ticker()->setTickCount(3);  // a narrow axis beside long row labels
  p->rescaleAxes();
  p->yAxis->setRange(-0.6, row - 0.4);
  p->xAxis->setRangeLower(0);
  p->xAxis->setRangeUpper(p->xAxis->range().upper * 1.1);
}

// Speed-up against the number of devices.
void drawSpeedup(QCustomPlot* p, const CompareResult& r, const ModeColours& c) {
  QVector<double> n, dp, ddp;
  for (const auto& s : r.speedup) {
    n << s.devices;
    dp << s.dp_speedup;
    ddp << s.ddp_speedup;
  }
  QCPGraph* ideal = p->addGraph();
  ideal->setName(CompareCharts::tr("ideal"));
  ideal->setPen(QPen(faded(c.text), 1, Qt::DashLine));
  ideal->setData(n, n, true);
  QCPGraph* dpLine = p->addGraph();
  dpLine->setName(CompareCharts::tr("DataParallel"));
  dpLine->setPen(QPen(c.dp, 2));
  dpLine->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
  dpLine->setData(n, dp, true);
  QCPGraph* ddpLine = p->addGraph();
  ddpLine->setName(CompareCharts::tr("DDP"));
  ddpLine->setPen(QPen(c.ddp, 2));
  ddpLine->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDiamond, 6));
  ddpLine->setData(n, ddp, true);
  // The machine's own limit, measured beside the sweep (independent GEMM workers), and at every
  // point each strategy's efficiency against it, so a speed-up is read against what this machine allows.
  QVector<double> limitN, limit;
  for (const auto& s : r.speedup)
    if (s.devices == 1 || s.machine_speedup > 0) {
      limitN << s.devices;
      limit << (s.devices == 1 ? 1.0 : s.machine_speedup);
    }
  if (limit.size() > 1) {
    QCPGraph* limitLine = p->addGraph();
    limitLine->setName(CompareCharts::tr("this machine's limit"));
    limitLine->setObjectName(QStringLiteral("machine-limit"));
    limitLine->setPen(QPen(c.text, 1.5, Qt::DotLine));
    limitLine->setData(limitN, limit, true);
  }
  QFont small = p->font();
  small.setPointSizeF(std::max(9.0, small.pointSizeF() * 0.85));
  const int lineHeight = QFontMetrics(small).height();
  for (const auto& s : r.speedup) {
    if (s.machine_speedup <= 0) continue;
    // Both labels above the higher of the two points, DDP's over DataParallel's, so they never
    // cover each other or the curves, however close the points are.
    const double top = std::max(s.dp_speedup, s.ddp_speedup);
    for (const auto& [efficiency, colour, lift] :
         {std::tuple{s.dp_efficiency, c.dp, 2}, std::tuple{s.ddp_efficiency, c.ddp, 2 + lineHeight}}) {
      auto* label = new QCPItemText(p);
      label->setObjectName(QStringLiteral("efficiency"));
      label->position->setCoords(s.devices, top);
      label->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
      label->setPadding(QMargins(0, 0, 0, lift));
      label->setFont(small);
      label->setColor(colour);
      label->setText(CompareCharts::tr("%1%").arg(std::lround(100 * efficiency)));
    }
  }
  p->xAxis->setLabel(CompareCharts::tr("devices; % of this machine's limit"));
  p->legend->setVisible(true);
  p->rescaleAxes();
  p->xAxis->setRange(0.5, std::max(2.0, n.isEmpty() ? 1.0 : n.back()) + 0.5);
  p->yAxis->setRangeLower(0);
  p->yAxis->setRangeUpper(p->yAxis->range().upper * 1.25);  // room for the two labels above the top points
}

}  // namespace

void CompareCharts::showResult(const CompareResult& r) {
  result_ = r;
  hasResult_ = true;
  const ModeColours c = coloursFor(palette());
  for (QCustomPlot* p : plots_) {
    p->clearPlottables();
    p->xAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    p->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    p->xAxis->setLabel(QString());
    p->yAxis->setLabel(QString());
    p->xAxis->grid()->setVisible(true);
    p->yAxis->grid()->setVisible(true);
  }
  const int world = dpv::course::compare_world_size(r.config);

  drawLoss(plot(Loss), r, c);
  drawParamDiff(plot(ParamDiff), r, c);
  barTop_[StepTime] = drawStepTime(plot(StepTime), r, c);
  barTop_[Memory] = drawMemory(plot(Memory), r, c, world);
  drawBytes(plot(Bytes), r, c);
  drawSpeedup(plot(Speedup), r, c);
  for (QCustomPlot* p : plots_) {
    style(p);
    p->legend->setIconSize(12, 8);
    p->replot();
  }
}

}  // namespace gui
