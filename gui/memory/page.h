#pragma once
// The "Memory" page: every rank's memory under DDP, ZeRO-1, ZeRO-2 and ZeRO-3 on the settings
// bar's model, devices and batch, with an optimizer picked here (Adam's two states per parameter
// are what ZeRO-1 shards). "Run" measures all four with course::compare_memory on a MemoryWorker
// thread; the page draws what comes back: four charts of one rank's bytes by kind through the
// iteration, a table of peak and persistent bytes per kind, the per-parameter formula beside the
// measured figures with the differences the run explains, and the "what fits" panel. The page
// computes none of these numbers: they are the engine's (course/zero_memory.h).
#include <QString>

#include "gui/common/page.h"
#include "gui/memory/memory_parts.h"
#include "gui/memory/worker.h"
#include "gui/runtime/generation.h"
#include "gui/runtime/worker_thread.h"

class QComboBox;
class QLabel;
class QPushButton;
class QScrollArea;
class QTableWidget;

namespace gui {

class MemoryCharts;
class MemoryFitsPanel;

class MemoryPage : public Page {
  Q_OBJECT
 public:
  // `runner`: what "Run" computes; empty for course::compare_memory (tests give their own).
  explicit MemoryPage(AppContext* context, QWidget* parent = nullptr, MemoryWorker::Runner runner = {});
  ~MemoryPage() override;  // waits for a comparison in progress on the worker's thread
  QList<Shot> screenshots() override;

  // The run "Run" starts: the settings bar's model, devices, batch, lr and seed, this page's optimizer.
  dpv::RunSpec spec() const;
  enum class Optimizer { Sgd, SgdMomentum, Adam, AdamW };
  void setOptimizer(Optimizer optimizer);
  void run();      // starts a comparison (a running one is dropped: its reply is stale)
  void cancel();   // drops the running comparison's reply; the page goes back to what it showed
  bool running() const { return running_; }
  // Shows `comparison` as if a run had returned it (the worker's replies come here).
  void showComparison(const MemoryResult& comparison);
  void setRank(int rank);
  // What rank 0 holds after stage `sample` of strategy `strategy` (0 DDP .. 3 ZeRO-3), and why it
  // differs from the formula there (course::explain_stage); a bar's click shows it.
  void showStage(int strategy, int sample);
  QString stageText() const;

  // --- State, for tests and screenshots.
  const MemoryResult& result() const { return result_; }
  QString errorText() const { return error_; }
  QString statusText() const;
  QString captionText() const;
  QString formulaText() const;
  QString differencesText() const;
  QTableWidget* table() const { return table_; }
  MemoryCharts* charts() const { return charts_; }
  MemoryFitsPanel* fitsPanel() const { return fits_; }
  QPushButton* runButton() const { return runButton_; }

 signals:
  void resultShown();
  void failed(const QString& message);
  void runRequested(const dpv::RunSpec& spec, quint64 generation);  // to the worker (queued)

 private:
  QWidget* buildControls();
  QWidget* buildBody();
  void onFinished(const MemoryResult& result, quint64 generation);
  void onFailed(const QString& message, quint64 generation);
  void setBusy(bool busy);
  void showRank();
  void showNextRun();
  void fillTable();
  QString caption(const dpv::course::MemoryComparison& c) const;
  QString formulaHtml(const dpv::course::MemoryComparison& c) const;
  QString differencesHtml(const dpv::course::MemoryComparison& c) const;

  QScrollArea* scroll_;
  QComboBox* optimizer_;
  QComboBox* rank_;
  QPushButton* runButton_;
  QPushButton* cancelButton_;
  QLabel* status_;
  QLabel* next_;     // what "Run" will measure
  QLabel* caption_;  // what the figures shown were measured on
  MemoryCharts* charts_;
  QTableWidget* table_;
  QLabel* stage_;  // the clicked stage's details
  QLabel* formula_;
  QLabel* differences_;
  MemoryFitsPanel* fits_;
  MemoryResult result_;
  QString error_;
  bool running_ = false;
  // Declared before the thread: the worker reads it until the thread has stopped.
  Generation generation_;
  WorkerThread<MemoryWorker> worker_;
};

}  // namespace gui
