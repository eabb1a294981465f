#pragma once
// Colours and axis styling for the BatchNorm lab's charts, derived from the widget palette so the
// charts follow the light and dark themes (no hard-coded white backgrounds).
#include <QColor>
#include <QPalette>

class QCustomPlot;

namespace gui {

struct BnLabChartColours {
  QColor background;  // the palette's Base: the same surface as text views
  QColor text;
  QColor grid;
  QColor subGrid;
  QColor perDevice;   // per-device BatchNorm model
  QColor sync;        // SyncBatchNorm model
  QColor reference;   // single-device reference
  QColor ddpPerRank;  // per-rank BatchNorm under DDP
  QColor ddpSync;     // SyncBatchNorm under DDP
  QColor device0;     // statistics rebuilt from device 0 alone
  bool dark = false;
};

BnLabChartColours bnlab_chart_colours(const QPalette& palette);
// Background, axes, ticks, labels, grid and legend of `plot` from `palette`.
void bnlab_style_plot(QCustomPlot* plot, const QPalette& palette);

}  // namespace gui
