#pragma once
// The BatchNorm lab's six QCustomPlot charts and the data behind them:
//   batch-mean, batch-var     each device's chunk statistic against the whole-batch one (this step)
//   running-mean, running-var the running buffers over the steps, for every model (DDP: rank 0's)
//   loss, accuracy            training loss, and accuracy on the batch, each in a chart of its own
//   distance                  max |difference| from the single-device reference (log axis)
// Colours come from the widget palette, so the charts follow light and dark themes. Replots are
// queued and spread over several event-loop turns, one chart per turn, so no single redraw
// stalls the window.
#include <QPointF>
#include <QStringList>
#include <QVector>
#include <QWidget>
#include <array>
#include <vector>

#include "gui/bnlab/types.h"

class QCustomPlot;
class QCPBars;
class QCPGraph;
class QCPTextElement;
class QCPItemText;
class QTimer;

namespace gui {

class BnLabCharts : public QWidget {
  Q_OBJECT
 public:
  enum Chart { BatchMean, BatchVar, RunningMean, RunningVar, Loss, Accuracy, Distance };
  static constexpr int kChartCount = 7;
  static QString chartId(Chart chart);     // "batch-mean", ... (file names, CSV)
  static QString chartTitle(Chart chart);  // "Batch mean per device", ...

  // Series names (legend entries and CSV columns). `model` is any model but the reference where a
  // series compares against it.
  static QString chunkSeries(BnLabModel model);  // bars: each device's chunk statistic (per-device, SyncBN, DDP per-rank)
  static QString wholeSeries(BnLabModel model);  // line: the whole-batch statistic (the DataParallel models and the reference)
  static QString runningSeries(BnLabModel model);
  static QString device0EmaSeries();             // running statistic rebuilt from device 0's chunks
  static QString lossSeries(BnLabModel model);
  static QString accuracySeries(BnLabModel model);
  static QString paramDistanceSeries(BnLabModel model);
  static QString gradDistanceSeries(BnLabModel model);
  static QString seriesHelp(Chart chart);  // what the chart's series are, in full (its tooltip)

  explicit BnLabCharts(QWidget* parent = nullptr);
  ~BnLabCharts() override;

  // Forgets every step (the lab's reset). `deviceCount` devices label the batch-statistics charts,
  // with the rows torch.chunk will give each (`expectedChunks`) until the first step arrives.
  void clear(int deviceCount, const std::vector<int64_t>& expectedChunks = {});
  // Which BatchNorm layer (position among the model's BatchNorm layers) and channel the
  // statistics charts show; `layerTitle` names it in the chart titles ("layer 1: BatchNorm1d(16)").
  void setSelection(int layerSlot, int channel, const QString& layerTitle);
  void appendSteps(const QVector<BnLabStep>& steps);

  // --- What is plotted, for tests and export.
  QCustomPlot* plot(Chart chart) const { return plots_[chart]; }
  QStringList seriesNames(Chart chart) const;
  // (key, value) pairs of a named series as plotted; empty when there is no such series.
  QVector<QPointF> seriesData(Chart chart, const QString& series) const;
  int64_t stepCount() const { return history_.empty() ? 0 : history_.back().step; }
  const BnLabStep* latestStep() const { return history_.empty() ? nullptr : &latest_; }
  int layerSlot() const { return layerSlot_; }
  int channel() const { return channel_; }
  // The smallest value the log axis shows; exact zeros are drawn there.
  static constexpr double kDistanceFloor = 1e-12;

  // --- Export. Both write atomically (dpv::write_file_atomic) and return an empty string on
  // success, otherwise the reason.
  QString savePng(Chart chart, const QString& path, int width = 0, int height = 0) const;
  QString saveCsv(Chart chart, const QString& path) const;
  QString csvText(Chart chart) const;

  // Redraws every chart now (for screenshots and tests; normal updates are queued).
  void replotNow();

 protected:
  void changeEvent(QEvent* event) override;
  bool eventFilter(QObject* watched, QEvent* event) override;  // legend columns follow each chart's width

 private:
  // The models with bars of per-device statistics, in bar order (the SyncBN bars at kSyncSlot).
  static constexpr std::array<BnLabModel, 3> kBarModels = {BnLabPerDevice, BnLabSync, BnLabDdpPerRank};
  static constexpr size_t kSyncSlot = 1;
  // The models compared with the reference.
  static constexpr std::array<BnLabModel, 4> kComparedModels = {BnLabPerDevice, BnLabSync, BnLabDdpPerRank, BnLabDdpSync};

  void buildPlots();
  void buildBatchCharts();    // bars per device, lines for the whole batch
  void buildRunningCharts();  // the running buffers over the steps
  void buildLossChart();
  void buildDistanceChart();
  void applyPalette();
  void markDirty();
  void replotNextDirty();
  void updateBatchCharts();
  void rebuildRunningCharts();
  void appendRunningPoint(const BnLabStep& step);
  void wrapTitles();  // titles broken into lines that fit their charts
  void updateTitles();

  std::array<QCustomPlot*, kChartCount> plots_{};
  std::array<QCPTextElement*, kChartCount> titles_{};
  std::array<QCPItemText*, kChartCount> emptyNotes_{};  // "no step yet" in the middle of each chart
  std::array<bool, kChartCount> dirty_{};
  QTimer* replotTimer_;
  int nextReplot_ = 0;

  // Batch statistics: [chart: mean or var][model: per-device, sync, DDP per-rank].
  std::array<std::array<QCPBars*, 3>, 2> chunkBars_{};
  std::array<std::array<QCPGraph*, kBnLabDpModelCount>, 2> wholeLines_{};  // [chart][DataParallel model or reference]
  // Running statistics: [chart][model], plus the device-0 rebuild.
  std::array<std::array<QCPGraph*, kBnLabModelCount>, 2> runningGraphs_{};
  std::array<QCPGraph*, 2> emaGraphs_{};
  std::array<QCPGraph*, kBnLabModelCount> lossGraphs_{};
  std::array<QCPGraph*, kBnLabModelCount> accuracyGraphs_{};
  // [model]; none for the reference.
  std::array<QCPGraph*, kBnLabModelCount> paramDistanceGraphs_{};
  std::array<QCPGraph*, kBnLabModelCount> gradDistanceGraphs_{};

  std::vector<BnLabStep> history_;  // every step; per-chunk statistics kept only in latest_
  BnLabStep latest_;
  std::vector<int64_t> expectedChunks_;
  int deviceCount_ = 1;
  int layerSlot_ = 0;
  int channel_ = 0;
  QString layerTitle_;
};

}  // namespace gui
