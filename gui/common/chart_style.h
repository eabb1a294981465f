#pragma once
// Colours, axis styling and legend placement for the app's QCustomPlot charts (the BatchNorm lab's,
// the DP vs DDP page's), derived from the widget palette so the
// charts follow the light and dark themes (no hard-coded white backgrounds).
#include <QColor>
#include <QPalette>

class QCustomPlot;

namespace gui {

// The smallest text a chart draws (legends, axis titles), in points: the app's minimum.
inline constexpr double kMinChartTextPt = 9.0;

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
// Moves `plot`'s legend out of the axis rect into a row of its own below it, `columns` entries a
// row, so it never covers a curve or a bar at any chart size.
void place_legend_below(QCustomPlot* plot, int columns);

}  // namespace gui
