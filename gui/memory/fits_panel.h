#pragma once
// The Memory page's "what fits" panel: the learner picks a model size (125M .. 70B parameters,
// typed or from the list), a GPU count and each GPU's memory (24, 40, 80, 141 GiB or typed), and
// sees course::what_fits per strategy: the model state's bytes per GPU and whether it fits. It is
// a formula scaled from the per-parameter costs the comparison measured, not a run, and says so.
#include <QWidget>
#include <optional>
#include <vector>

#include "gui/memory/memory_parts.h"

class QComboBox;
class QLabel;
class QSpinBox;
class QTableWidget;

namespace gui {

class MemoryFitsPanel : public QWidget {
  Q_OBJECT
 public:
  explicit MemoryFitsPanel(QWidget* parent = nullptr);
  // The measured comparison the estimates scale (null: none yet, the table is empty).
  void setMeasured(const MemoryResult& measured);

  void setModelSize(const QString& text);  // "7B", "125M", "1.3e9", "70000000000"
  void setGpuCount(int gpus);
  void setGpuMemory(const QString& gibText);  // "80", "80 GiB"
  const std::vector<dpv::course::FitEstimate>& estimates() const { return estimates_; }
  QTableWidget* table() const { return table_; }
  QString noteText() const;
  QString problemText() const;  // why nothing is estimated ("" when the table is filled)

  // A parameter count as a learner types it: a number with an optional K, M, B or T suffix
  // ("1.3B", "125 M", "7e9"); nothing for anything else or a count under 1.
  static std::optional<int64_t> parseParameterCount(const QString& text);
  // GiB as typed ("80", "80 GiB", "141.5"); nothing for anything else or a size not above 0.
  static std::optional<double> parseGibibytes(const QString& text);

 signals:
  void estimated();  // the table was refilled (or emptied)

 private:
  void update();
  void showProblem(const QString& text);

  QComboBox* modelSize_;
  QSpinBox* gpus_;
  QComboBox* gpuMemory_;
  QTableWidget* table_;
  QLabel* note_;
  QLabel* problem_;
  MemoryResult measured_;
  std::vector<dpv::course::FitEstimate> estimates_;
};

}  // namespace gui
