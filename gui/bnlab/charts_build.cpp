// The BatchNorm lab's charts built and styled: the six plots, their series, the palette's colours
// and the legend columns that follow each chart's width (charts.cpp feeds them the steps).
#include <QEvent>
#include <QGridLayout>
#include <QTimer>
#include <algorithm>
#include <qcustomplot.h>

#include "gui/common/chart_style.h"
#include "gui/bnlab/charts.h"

namespace gui {

BnLabCharts::BnLabCharts(QWidget* parent) : QWidget(parent), replotTimer_(new QTimer(this)) {
  // One chart per event-loop turn: the longest pause the window sees is one chart's redraw.
  replotTimer_->setInterval(2);
  connect(replotTimer_, &QTimer::timeout, this, &BnLabCharts::replotNextDirty);
  buildPlots();
  applyPalette();
  clear(1);
}

BnLabCharts::~BnLabCharts() = default;

void BnLabCharts::buildPlots() {
  auto* grid = new QGridLayout(this);
  grid->setContentsMargins(0, 0, 0, 0);
  grid->setSpacing(6);
  for (int c = 0; c < kChartCount; ++c) {
    auto* plot = new QCustomPlot(this);
    plot->setObjectName(chartId(static_cast<Chart>(c)));
    // Tall enough for a two-line title, two-line device ticks and three legend rows at 1024x640
    // (the page scrolls down to the last charts there).
    plot->setMinimumSize(240, 215);
    plot->setNoAntialiasingOnDrag(true);
    // Lines as one polyline each: several times faster for wide pens, which keeps every replot
    // well inside a frame however many steps the curves hold.
    plot->setPlottingHint(QCP::phFastPolylines, true);
    plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    plot->plotLayout()->insertRow(0);
    titles_[c] = new QCPTextElement(plot, chartTitle(static_cast<Chart>(c)));
    plot->plotLayout()->addElement(0, 0, titles_[c]);
    // The legend sits below the axes, so it never hides bars or curves.
    plot->legend->setVisible(true);
    plot->legend->setFillOrder(QCPLegend::foColumnsFirst);
    plot->legend->setWrap(2);
    plot->legend->setRowSpacing(0);
    plot->legend->setColumnSpacing(6);
    plot->legend->setIconSize(16, 10);  // room for two columns of entries in a chart 270 pixels wide
    plot->plotLayout()->addElement(2, 0, plot->legend);
    plot->plotLayout()->setRowStretchFactor(2, 0.001);
    plot->installEventFilter(this);
    plot->setToolTip(seriesHelp(static_cast<Chart>(c)));
    emptyNotes_[c] = new QCPItemText(plot);
    emptyNotes_[c]->position->setType(QCPItemPosition::ptAxisRectRatio);
    emptyNotes_[c]->position->setCoords(0.5, 0.45);
    emptyNotes_[c]->setText(tr("No training step yet: press Start"));
    emptyNotes_[c]->setClipToAxisRect(true);
    plots_[c] = plot;
    // Two a row; the last (the distance from the reference) alone takes the whole width.
    const bool last = c == kChartCount - 1 && kChartCount % 2 == 1;
    grid->addWidget(plot, c / 2, c % 2, 1, last ? 2 : 1);
  }
  buildBatchCharts();
  buildRunningCharts();
  buildLossChart();
  buildDistanceChart();
}

// Batch statistics: bars per device for both models, lines for the whole-batch values.
void BnLabCharts::buildBatchCharts() {
  for (int s = 0; s < 2; ++s) {
    QCustomPlot* plot = plots_[s == 0 ? BatchMean : BatchVar];
    auto* group = new QCPBarsGroup(plot);
    for (size_t b = 0; b < kBarModels.size(); ++b) {
      auto* bars = new QCPBars(plot->xAxis, plot->yAxis);
      bars->setName(chunkSeries(kBarModels[b]));
      bars->setWidth(0.26);
      bars->setBarsGroup(group);
      chunkBars_[s][b] = bars;
    }
    for (int m = 0; m < kBnLabDpModelCount; ++m) {
      auto* line = plot->addGraph();
      line->setName(wholeSeries(static_cast<BnLabModel>(m)));
      wholeLines_[s][m] = line;
    }
    plot->xAxis->setLabel(tr("device: rows in its chunk"));
    plot->yAxis->setLabel(s == 0 ? tr("mean") : tr("biased variance"));
    plot->xAxis->setTicker(QSharedPointer<QCPAxisTickerText>(new QCPAxisTickerText));
  }
}

// Running statistics over the steps.
void BnLabCharts::buildRunningCharts() {
  for (int s = 0; s < 2; ++s) {
    QCustomPlot* plot = plots_[s == 0 ? RunningMean : RunningVar];
    // Drawn bottom to top: the wide per-device curve, the wide translucent reference, the thin
    // SyncBN curve, the DDP curves (dash-dot), the dashed device-0 rebuild; where curves coincide
    // each stays visible.
    for (int m : {BnLabPerDevice, BnLabReference, BnLabSync, BnLabDdpPerRank, BnLabDdpSync}) {
      auto* g = plot->addGraph();
      g->setName(runningSeries(static_cast<BnLabModel>(m)));
      // Antialiased dash-dot lines cost most of a redraw; these thin ones read fine without.
      if (bnlab_is_ddp(static_cast<BnLabModel>(m))) g->setAntialiased(false);
      runningGraphs_[s][m] = g;
    }
    emaGraphs_[s] = plot->addGraph();
    emaGraphs_[s]->setName(device0EmaSeries());
    plot->xAxis->setLabel(tr("training step"));
    plot->yAxis->setLabel(s == 0 ? tr("running_mean") : tr("running_var"));
  }
}

// Loss and accuracy, each in a chart of its own: ten noisy curves on two axes did not read.
void BnLabCharts::buildLossChart() {
  QCustomPlot* loss = plots_[Loss];
  QCustomPlot* accuracy = plots_[Accuracy];
  for (int m : {BnLabReference, BnLabSync, BnLabPerDevice, BnLabDdpSync, BnLabDdpPerRank}) {
    lossGraphs_[m] = loss->addGraph();
    lossGraphs_[m]->setName(lossSeries(static_cast<BnLabModel>(m)));
    accuracyGraphs_[m] = accuracy->addGraph();
    accuracyGraphs_[m]->setName(accuracySeries(static_cast<BnLabModel>(m)));
    if (bnlab_is_ddp(static_cast<BnLabModel>(m))) {
      lossGraphs_[m]->setAntialiased(false);  // dash-dot: see above
      accuracyGraphs_[m]->setAntialiased(false);
    }
  }
  loss->xAxis->setLabel(tr("training step"));
  loss->yAxis->setLabel(tr("loss (nats)"));
  accuracy->xAxis->setLabel(tr("training step"));
  accuracy->yAxis->setLabel(tr("accuracy (%)"));
  accuracy->yAxis->setRange(0, 100);
}

// Distance from the reference, on a log axis.
void BnLabCharts::buildDistanceChart() {
  QCustomPlot* plot = plots_[Distance];
  for (BnLabModel m : kComparedModels) {
    paramDistanceGraphs_[m] = plot->addGraph();
    paramDistanceGraphs_[m]->setName(paramDistanceSeries(m));
    if (bnlab_is_ddp(m)) paramDistanceGraphs_[m]->setAntialiased(false);  // dash-dot
    gradDistanceGraphs_[m] = plot->addGraph();
    gradDistanceGraphs_[m]->setName(gradDistanceSeries(m));
    gradDistanceGraphs_[m]->removeFromLegend();  // same colour as the parameters, dots; the axis label says so
    gradDistanceGraphs_[m]->setAntialiased(false);
  }
  plot->yAxis->setScaleType(QCPAxis::stLogarithmic);
  plot->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  plot->yAxis->setNumberFormat(QStringLiteral("eb"));
  plot->yAxis->setNumberPrecision(0);
  plot->xAxis->setLabel(tr("training step"));
  plot->yAxis->setLabel(tr("max |Δ| (lines: params, dots: grads)"));
  plot->yAxis->setRange(1e-9, 1);
}

void BnLabCharts::applyPalette() {
  const BnLabChartColours colours = bnlab_chart_colours(palette());
  for (auto* plot : plots_) bnlab_style_plot(plot, palette());
  QColor faint = colours.text;
  faint.setAlpha(140);
  for (int c = 0; c < kChartCount; ++c) {
    titles_[c]->setTextColor(colours.text);
    emptyNotes_[c]->setColor(faint);
  }

  const std::array<QColor, kBnLabModelCount> model = {colours.perDevice, colours.sync, colours.reference,
                                                       colours.ddpPerRank, colours.ddpSync};
  // The DDP models' curves are dash-dot, so the two families read apart at a glance.
  const auto ddpPen = [&model](BnLabModel m, double width) { return QPen(model[m], width, Qt::DashDotLine); };
  for (int s = 0; s < 2; ++s) {
    for (size_t b = 0; b < kBarModels.size(); ++b) {
      QColor fill = model[kBarModels[b]];
      fill.setAlpha(b == kSyncSlot ? 110 : 200);  // the SyncBN chunks are context, kept lighter
      chunkBars_[s][b]->setBrush(fill);
      chunkBars_[s][b]->setPen(QPen(model[kBarModels[b]].darker(120), 1));
    }
    wholeLines_[s][BnLabPerDevice]->setPen(QPen(model[BnLabPerDevice], 2, Qt::DashLine));
    wholeLines_[s][BnLabSync]->setPen(QPen(model[BnLabSync], 2.5, Qt::SolidLine));
    wholeLines_[s][BnLabReference]->setPen(QPen(model[BnLabReference], 2, Qt::DotLine));

    QColor wide = model[BnLabReference];
    wide.setAlpha(150);
    runningGraphs_[s][BnLabReference]->setPen(QPen(wide, 5));
    runningGraphs_[s][BnLabSync]->setPen(QPen(model[BnLabSync], 1.8));
    // Wide under thin: where the device-0 rebuild lies on the per-device curve, both stay visible.
    runningGraphs_[s][BnLabPerDevice]->setPen(QPen(model[BnLabPerDevice], 4.5));
    runningGraphs_[s][BnLabDdpPerRank]->setPen(ddpPen(BnLabDdpPerRank, 2));
    runningGraphs_[s][BnLabDdpSync]->setPen(ddpPen(BnLabDdpSync, 1.5));
    emaGraphs_[s]->setPen(QPen(colours.device0, 1.5, Qt::DashLine));
  }
  for (int m = 0; m < kBnLabModelCount; ++m) {
    lossGraphs_[m]->setPen(bnlab_is_ddp(static_cast<BnLabModel>(m)) ? ddpPen(static_cast<BnLabModel>(m), 1.5)
                                                                    : QPen(model[m], m == BnLabReference ? 3.5 : 1.5));
    accuracyGraphs_[m]->setPen(lossGraphs_[m]->pen());  // its own chart: the same encoding as the loss
  }
  for (BnLabModel m : kComparedModels) {
    paramDistanceGraphs_[m]->setPen(bnlab_is_ddp(m) ? ddpPen(m, 2) : QPen(model[m], 2));
    // The gradients as dots: a dashed line read as one of the DDP models' dash-dot curves.
    gradDistanceGraphs_[m]->setPen(QPen(model[m], 1));
    gradDistanceGraphs_[m]->setLineStyle(QCPGraph::lsNone);
    gradDistanceGraphs_[m]->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 3));
  }
  markDirty();
}

bool BnLabCharts::eventFilter(QObject* watched, QEvent* event) {
  if (event->type() == QEvent::Resize)
    if (auto* plot = qobject_cast<QCustomPlot*>(watched)) {
      // As many legend columns as fit; a legend wider than its chart would be cut off.
      int widest = 1;
      for (int i = 0; i < plot->legend->itemCount(); ++i)
        if (QCPAbstractLegendItem* item = plot->legend->item(i))  // a wrapped grid has empty cells
          widest = std::max(widest, item->minimumOuterSizeHint().width());
      const QMargins m = plot->legend->margins();
      const int room = plot->width() - m.left() - m.right();
      const int spacing = plot->legend->columnSpacing();
      const int columns = std::clamp((room + spacing) / (widest + spacing), 1, 4);
      if (plot->legend->wrap() != columns) {
        plot->legend->setWrap(columns);
        plot->legend->setFillOrder(plot->legend->fillOrder(), true);  // a new wrap moves only items added later
      }
      wrapTitles();
    }
  return QWidget::eventFilter(watched, event);
}

void BnLabCharts::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange) applyPalette();
}

}  // namespace gui
