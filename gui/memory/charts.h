#pragma once
// The Memory page's four charts (QCustomPlot), one per strategy (DDP, ZeRO-1, ZeRO-2, ZeRO-3):
// one rank's bytes by kind after each stage of the measured iteration, stacked bars, the stages
// in plan order under them. All four share one value axis (the largest total any rank of any
// strategy reaches), so their heights compare at a glance and stay put when the rank changes.
// The bars are the engine's numbers as they come (course::MemoryComparison).
#include <QWidget>
#include <array>

#include "gui/memory/memory_parts.h"

class QCustomPlot;
class QGridLayout;
class QLabel;

namespace gui {

class MemoryCharts : public QWidget {
  Q_OBJECT
 public:
  static constexpr int kStrategies = 4;
  explicit MemoryCharts(QWidget* parent = nullptr);
  // Draws `comparison` for `rank` (0 <= rank < comparison.world); the value axis is the same for all.
  void show(const MemoryResult& comparison, int rank);
  void clear();
  void applyTheme();
  QCustomPlot* plot(int strategy) const { return plots_[static_cast<size_t>(strategy)]; }
  int columns() const { return columns_; }
  QString legendText() const;

 signals:
  // A bar was clicked: stage `sample` of strategy `strategy` (0 DDP .. 3 ZeRO-3).
  void stageClicked(int strategy, int sample);

 protected:
  void changeEvent(QEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  void style(QCustomPlot* plot, const QString& title);
  bool arrange(int columns);  // whether the grid changed
  int columnsFor(int width) const;
  QString theme() const;
  std::array<QCustomPlot*, kStrategies> plots_{};
  QLabel* legend_;
  QGridLayout* grid_;
  int columns_ = 0;
  MemoryResult shown_;  // what is drawn (null: nothing)
  int rank_ = 0;
  int stages_ = 0;  // the most stages a strategy's iteration has: how wide a chart must be
};

}  // namespace gui
