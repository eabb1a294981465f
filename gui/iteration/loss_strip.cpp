#include "gui/iteration/loss_strip.h"

#include <QEvent>
#include <QVBoxLayout>
#include <QLabel>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "gui/common/chart_style.h"

namespace gui {

LossStrip::LossStrip(QWidget* parent) : QWidget(parent) {
  // One line of text above a short plot (short enough for the strip at 1024x640): no word wrap, so
  // the strip's height never depends on its width (the page sits in a scroll area that would grow).
  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(0, 0, 0, 0);
  column->setSpacing(2);
  caption_ = new QLabel(this);
  caption_->setObjectName(QStringLiteral("hintLabel"));
  caption_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // long text must not widen the page
  plot_ = new QCustomPlot(this);
  plot_->setFixedHeight(84);  // room for the iteration axis's title under its labels
  plot_->setInteractions({});
  graph_ = plot_->addGraph();
  graph_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 5));
  QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
  ticker->setTickStep(1);
  ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);  // whole iterations only
  plot_->xAxis->setTicker(ticker);
  // A strip this short has room for two or three labels (the default ticker put four or five on
  // 0..1, on top of one another): the step is set with the range, at least half of it.
  QSharedPointer<QCPAxisTickerFixed> yTicker(new QCPAxisTickerFixed);
  yTicker->setScaleStrategy(QCPAxisTickerFixed::ssNone);
  plot_->yAxis->setTicker(yTicker);
  QFont titleFont = plot_->font();
  titleFont.setPointSizeF(std::max(kMinChartTextPt, titleFont.pointSizeF()));
  plot_->xAxis->setLabelFont(titleFont);
  plot_->yAxis->setLabelFont(titleFont);
  plot_->xAxis->setLabelPadding(1);
  plot_->yAxis->setLabelPadding(1);
  plot_->xAxis->setLabel(tr("iteration"));
  column->addWidget(caption_);
  column->addWidget(plot_);
  applyPalette();
  setLosses({});
}

namespace {
// The smallest of 1, 2 and 5 times a power of ten that is at least `x` (> 0).
double niceStepAtLeast(double x) {
  if (!(x > 0)) return 1.0;
  const double power = std::pow(10.0, std::floor(std::log10(x)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * power >= x * (1 - 1e-9)) return m * power;
  return 10 * power;
}
// The loss axis fitted to the losses with a margin of a tenth of their span (at least a small
// share of the loss itself, so one point or a flat run still shows a band around it): a fall from
// 1.1251 to 1.1019 fills the strip instead of hiding in a 0..1.3 scale.
QCPRange fittedLossRange(const QVector<double>& losses) {
  if (losses.isEmpty()) return QCPRange(0, 1);
  const auto [low, high] = std::minmax_element(losses.begin(), losses.end());
  const double margin = std::max({0.1 * (*high - *low), 0.005 * std::abs(*high), 1e-6});
  return QCPRange(*low - margin, *high + margin);
}

// The tick step for `range` (two or three labels fit the strip's height), widening `range` to the
// ticks around it when it held only one.
double fitTicks(QCPRange& range) {
  const double step = niceStepAtLeast(range.size() / 2.5);
  const double firstTick = std::ceil(range.lower / step), lastTick = std::floor(range.upper / step);
  if (lastTick - firstTick < 1) range = QCPRange(std::floor(range.lower / step) * step, std::ceil(range.upper / step) * step);
  return step;
}

}  // namespace

void LossStrip::setLosses(const QVector<double>& losses) {
  losses_ = losses;
  QVector<double> x, y;
  for (int i = 0; i < losses.size(); ++i) {
    x << i + 1;
    y << losses[i];
  }
  graph_->setData(x, y, true);
  plot_->xAxis->setRange(0.5, std::max(5.0, losses.size() + 0.5));
  QCPRange range = fittedLossRange(losses);
  const double step = fitTicks(range);
  if (auto yTicker = qSharedPointerDynamicCast<QCPAxisTickerFixed>(plot_->yAxis->ticker())) yTicker->setTickStep(step);
  plot_->yAxis->setRange(range);
  const QString whose = meaning_ == LossMeaning::WholeBatch ? tr("Loss (whole batch)") : tr("Rank 0's loss (its shard)");
  // The rotated title has the strip's height only: a word; the caption above says whose loss it is.
  plot_->yAxis->setLabel(meaning_ == LossMeaning::WholeBatch ? tr("loss") : tr("rank 0"));
  if (losses.isEmpty()) {
    caption_->setText(tr("%1: the Loss stage draws the first point.").arg(whose));
  } else {
    caption_->setText(losses.size() == 1 ? tr("%1 · iteration 1: %2 · each iteration trains on this batch")
                                               .arg(whose)
                                               .arg(losses.front(), 0, 'f', 4)
                                         : tr("%1 · iteration %2: %3 (first: %4) · same batch")
                                               .arg(whose)
                                               .arg(losses.size())
                                               .arg(losses.back(), 0, 'f', 4)
                                               .arg(losses.front(), 0, 'f', 4));
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void LossStrip::setMeaning(LossMeaning meaning) {
  meaning_ = meaning;
  setLosses(losses_);
}

QString LossStrip::xTitle() const { return plot_->xAxis->label(); }
QString LossStrip::yTitle() const { return plot_->yAxis->label(); }
QPointF LossStrip::yRange() const { return QPointF(plot_->yAxis->range().lower, plot_->yAxis->range().upper); }

QVector<QPointF> LossStrip::points() const {
  QVector<QPointF> out;
  for (auto it = graph_->data()->constBegin(); it != graph_->data()->constEnd(); ++it) out << QPointF(it->key, it->value);
  return out;
}

QString LossStrip::caption() const { return caption_->text(); }

void LossStrip::applyPalette() {
  bnlab_style_plot(plot_, palette());
  graph_->setPen(QPen(bnlab_chart_colours(palette()).sync, 2));
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void LossStrip::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange && plot_) applyPalette();
}

}  // namespace gui
