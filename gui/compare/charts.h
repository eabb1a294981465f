#pragma once
// The DP-vs-DDP page's six charts (QCustomPlot), drawn from one course::CompareResult: loss per
// iteration, max parameter difference against one device, time per step by part, peak memory per
// device by kind, bytes per step by transfer, and speed-up against the number of devices. The
// charts plot the engine's numbers as they come; the only drawn line not from the engine is the
// speed-up chart's "ideal" diagonal.
#include <QList>
#include <QString>
#include <QWidget>
#include <array>
#include <cstdint>
#include <optional>

#include "course/ddp_compare.h"

class QCustomPlot;

namespace gui {

// One part of the memory chart's stacked bars: a kind of the engine's MemoryBreakdown (none: what
// lived only inside a stage), its legend name, and its bytes on device d of a run.
struct MemoryChartPart {
  std::optional<dpv::MemoryKind> kind;
  QString name;
  int64_t (*bytes)(const dpv::course::ModeRun& run, size_t device);
};
const QList<MemoryChartPart>& memoryChartParts();
// The object name of a memory chart's bars (tests find them by it): "memory DP parameters".
QString memoryBarsName(bool ddp, const QString& part);

class CompareCharts : public QWidget {
  Q_OBJECT
 public:
  enum Chart { Loss, ParamDiff, StepTime, Memory, Bytes, Speedup, kChartCount };
  explicit CompareCharts(QWidget* parent = nullptr);
  void showResult(const dpv::course::CompareResult& result);
  void clear();
  void applyTheme();
  QCustomPlot* plot(Chart chart) const { return plots_[static_cast<size_t>(chart)]; }
  static QString title(Chart chart);

 protected:
  void changeEvent(QEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 public:
  int columns() const { return columns_; }  // 3 charts a row, or 2 when each would be narrower than its titles

 private:
  void style(QCustomPlot* plot);
  std::array<QCustomPlot*, kChartCount> plots_{};
  // Per chart: its highest stacked bar, kept below the legend (0: none).
  std::array<double, kChartCount> barTop_{};
  void arrange(int columns);
  int columns_ = 0;
  bool hasResult_ = false;
  dpv::course::CompareResult result_;
};

}  // namespace gui
