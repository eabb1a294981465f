#pragma once
// The "DP vs DDP" page: one device, DataParallel and DistributedDataParallel trained on the same
// model, seed and global batches (course::run_comparison on the engine's worker thread), shown as
// six charts (gui/compare/charts.h), a sum-versus-mean panel on one gradient element, and a
// sentence on why per-device BatchNorm makes DP and DDP differ from one device.
#include <atomic>
#include <memory>

#include "course/ddp_compare.h"
#include "gui/common/page.h"

class QBoxLayout;
class QComboBox;
class QLabel;
class QPushButton;
class QResizeEvent;
class QSpinBox;

namespace gui {

class CompareCharts;
class LessonPanel;

class ComparePage : public Page {
  Q_OBJECT
 public:
  ComparePage(AppContext* context, QWidget* parent = nullptr);
  QList<Shot> screenshots() override;
  // Its own model, device and batch controls; the seed is the settings' (shown in the status line).
  bool usesSettingsBar() const override { return false; }

  // Runs the comparison with the page's settings on the engine (and the settings bar's seed).
  void run();
  dpv::course::CompareConfig config() const;
  void setConfig(const dpv::course::CompareConfig& config);  // the page's controls; seed and lr kept for run()
  bool running() const { return running_; }
  bool hasResult() const { return hasResult_; }
  const dpv::course::CompareResult& result() const { return result_; }
  CompareCharts* charts() const { return charts_; }
  LessonPanel* lessonPanel() const { return lesson_; }  // lessons/ddp/dp-vs-ddp.md
  QString sumMeanText() const;
  QString noteText() const;
  QString runCaption() const;        // "Data: model … · seed … · batch … · modes · devices"
  QString coresBannerText() const;   // "" unless the simulated devices share fewer hardware threads
  QString errorText() const { return error_; }
  bool lessonBelowCharts() const;  // on a narrow page the lesson goes under the charts

 signals:
  void resultShown();
  void failed(const QString& message);

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void showResult(const dpv::course::CompareResult& result);
  void placeLesson();
  static QString dataText(const dpv::course::CompareResult& r);   // the batches, from the run's facts
  static QString coresText(const dpv::course::CompareResult& r);  // "" when every device has a thread

  QComboBox* preset_;
  QSpinBox* devices_;
  QSpinBox* batch_;
  QSpinBox* iterations_;
  QSpinBox* sweep_;
  QPushButton* runButton_;
  QLabel* status_;
  QLabel* note_;
  QLabel* runCaption_;
  QLabel* coresBanner_;
  QLabel* sumMean_;
  CompareCharts* charts_;
  LessonPanel* lesson_;
  QWidget* lessonCard_ = nullptr;
  QBoxLayout* body_ = nullptr;  // charts and lesson: side by side, or the lesson below on a narrow page
  dpv::course::CompareResult result_;
  bool hasResult_ = false;
  bool running_ = false;
  QString error_;
  quint64 request_ = 0;
  // The batch the running comparison reads before each iteration (the batch control, live).
  std::shared_ptr<std::atomic<int64_t>> liveBatch_ = std::make_shared<std::atomic<int64_t>>(0);
};

}  // namespace gui
