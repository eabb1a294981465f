#pragma once
// Tensor inspector: what a clicked chip holds — name, shape, dtype, device, bytes and the first
// values of each tensor (dpv::TensorInfo from the engine's snapshot).
#include <QWidget>

#include "gui/iteration/scene_model.h"

class QLabel;
class QTreeWidget;

namespace gui {

class TensorInspector : public QWidget {
  Q_OBJECT
 public:
  explicit TensorInspector(QWidget* parent = nullptr);
  void showChip(const ChipView& chip, const QString& deviceTitle);
  void clear();
  int rowCount() const;
  QString rowText(int row, int column) const;
  QString headline() const;

 private:
  QLabel* headline_;
  QTreeWidget* tree_;
};

}  // namespace gui
