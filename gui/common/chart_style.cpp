#include "gui/common/chart_style.h"

#include <algorithm>
#include <qcustomplot.h>

namespace gui {

BnLabChartColours bnlab_chart_colours(const QPalette& palette) {
  BnLabChartColours c;
  c.background = palette.color(QPalette::Base);
  c.text = palette.color(QPalette::Text);
  c.dark = c.background.lightnessF() < 0.5;
  c.grid = c.text;
  c.grid.setAlpha(c.dark ? 60 : 45);
  c.subGrid = c.text;
  c.subGrid.setAlpha(c.dark ? 25 : 18);
  // Hues chosen to stay apart for the common colour-vision deficiencies (orange / blue / green),
  // lighter on dark backgrounds so they keep their contrast.
  c.perDevice = c.dark ? QColor(0xff, 0xa6, 0x4d) : QColor(0xd9, 0x5f, 0x02);
  c.sync = c.dark ? QColor(0x6c, 0xb4, 0xff) : QColor(0x1f, 0x5f, 0xbf);
  c.reference = c.dark ? QColor(0x7f, 0xd1, 0x8b) : QColor(0x2e, 0x8b, 0x3e);
  // The DDP pair: an ochre and a teal, near their DataParallel counterparts' hues but apart from them.
  c.ddpPerRank = c.dark ? QColor(0xf0, 0xd0, 0x50) : QColor(0x9a, 0x6a, 0x00);
  c.ddpSync = c.dark ? QColor(0x4f, 0xd8, 0xd8) : QColor(0x00, 0x80, 0x8a);
  c.device0 = c.dark ? QColor(0xe0, 0xa0, 0xff) : QColor(0x7b, 0x2f, 0xa8);
  return c;
}

void bnlab_style_plot(QCustomPlot* plot, const QPalette& palette) {
  const BnLabChartColours c = bnlab_chart_colours(palette);
  plot->setBackground(c.background);
  plot->axisRect()->setBackground(c.background);
  for (QCPAxis* axis : plot->axisRect()->axes()) {
    axis->setBasePen(QPen(c.text, 1));
    axis->setTickPen(QPen(c.text, 1));
    axis->setSubTickPen(QPen(c.text, 1));
    axis->setTickLabelColor(c.text);
    axis->setLabelColor(c.text);
    axis->grid()->setPen(QPen(c.grid, 1, Qt::DotLine));
    axis->grid()->setSubGridPen(QPen(c.subGrid, 1, Qt::DotLine));
    axis->grid()->setZeroLinePen(QPen(c.grid, 1));
  }
  QColor legendFill = c.background;
  legendFill.setAlpha(230);
  plot->legend->setBrush(legendFill);
  plot->legend->setBorderPen(Qt::NoPen);
  plot->legend->setTextColor(c.text);
  // Legends in the body size: smaller would fall under 9 pt, the smallest text the app draws.
  QFont legendFont = plot->font();
  legendFont.setPointSizeF(std::max(kMinChartTextPt, legendFont.pointSizeF()));
  plot->legend->setFont(legendFont);
}

void place_legend_below(QCustomPlot* plot, int columns) {
  QCPLayoutInset* inset = plot->axisRect()->insetLayout();
  for (int i = 0; i < inset->elementCount(); ++i) {
    if (inset->elementAt(i) != plot->legend) continue;
    inset->take(plot->legend);
    inset->simplify();
    break;
  }
  QCPLayoutGrid* grid = plot->plotLayout();
  if (plot->legend->layout() != grid) {
    const int row = grid->rowCount();
    grid->addElement(row, 0, plot->legend);
    grid->setRowStretchFactor(row, 0.001);  // as tall as its entries, the rest for the axes
  }
  plot->legend->setFillOrder(QCPLegend::foColumnsFirst, false);
  plot->legend->setWrap(columns);
  plot->legend->setFillOrder(QCPLegend::foColumnsFirst, true);
}

}  // namespace gui
