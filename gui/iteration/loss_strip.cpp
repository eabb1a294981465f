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
  // One line of text above a short plot: no word wrap, so the strip's height never depends on its
  // width (the page sits in a scroll area that would otherwise grow).
  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(0, 0, 0, 0);
  column->setSpacing(2);
  caption_ = new QLabel(this);
  caption_->setObjectName(QStringLiteral("hintLabel"));
  caption_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // long text must not widen the page
  plot_ = new QCustomPlot(this);
  plot_->setFixedHeight(72);
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
}  // namespace

void LossStrip::setLosses(const QVector<double>& losses) {
  QVector<double> x, y;
  for (int i = 0; i < losses.size(); ++i) {
    x << i + 1;
    y << losses[i];
  }
  graph_->setData(x, y, true);
  plot_->xAxis->setRange(0.5, std::max(5.0, losses.size() + 0.5));
  const double top = losses.isEmpty() ? 1.0 : 1.15 * *std::max_element(losses.begin(), losses.end());
  if (auto yTicker = qSharedPointerDynamicCast<QCPAxisTickerFixed>(plot_->yAxis->ticker()))
    yTicker->setTickStep(niceStepAtLeast(top / 2));
  if (losses.isEmpty()) {
    plot_->yAxis->setRange(0, 1);
    caption_->setText(tr("Loss per iteration: step through an iteration to its Loss stage to see the first point."));
  } else {
    // From zero, so the fall reads as a share of the first loss.
    plot_->yAxis->setRange(0, top);
    caption_->setText(losses.size() == 1 ? tr("Loss per iteration · iteration 1: %1. The next iterations train on the same batch.")
                                               .arg(losses.front(), 0, 'f', 4)
                                         : tr("Loss per iteration · iteration %1: %2 (first: %3), same batch each time.")
                                               .arg(losses.size())
                                               .arg(losses.back(), 0, 'f', 4)
                                               .arg(losses.front(), 0, 'f', 4));
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

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
