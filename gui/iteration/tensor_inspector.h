#pragma once
// Tensor inspector: what a clicked chip holds — name, shape, bytes and values of each tensor
// (dpv::TensorInfo from the engine's snapshot), why the device holds the selected one, and a heat
// map of its values when the snapshot kept them all (small tensors).
#include <QWidget>

#include "gui/common/scene_model.h"

class QLabel;
class QSplitter;
class QTreeWidget;

namespace gui {

// The values of a small tensor as coloured cells (blue below zero, red above, white at zero),
// laid out as its rows and columns; a 1-D tensor is one row.
class HeatMap : public QWidget {
  Q_OBJECT
 public:
  explicit HeatMap(QWidget* parent = nullptr);
  // Shows `t` when its snapshot holds every value; returns false (and shows nothing) otherwise.
  bool setTensor(const dpv::TensorInfo& t);
  void clear();
  int rows() const { return rows_; }
  int columns() const { return cols_; }
  QColor cellColor(int row, int column) const;
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;

 private:
  QRectF cellRect(int row, int column) const;
  std::vector<double> values_;
  int rows_ = 0;
  int cols_ = 0;
  double scale_ = 1;
};

class TensorInspector : public QWidget {
  Q_OBJECT
 public:
  explicit TensorInspector(QWidget* parent = nullptr);
  void showChip(const ChipView& chip, const QString& deviceTitle);
  // Rows that are not one device's memory (the DDP view: a tensor on every rank, a shard's
  // samples), under a headline of their own (rich text); row `selected` is selected.
  void showRows(const QString& headline, const QList<dpv::TensorInfo>& tensors, int selected);
  void clear();
  int rowCount() const;
  QString rowText(int row, int column) const;
  QString headline() const;
  // Selects a tensor row: its reason and (small tensors) its heat map are shown.
  void selectRow(int row);
  QString whyText() const;
  HeatMap* heatMap() const { return heat_; }
  QTreeWidget* tree() const { return tree_; }

 private:
  void onRowChanged();
  void fillRows(const QList<dpv::TensorInfo>& tensors);
  QLabel* headline_;
  QSplitter* split_;
  QTreeWidget* tree_;
  QLabel* why_;
  QLabel* heatTitle_;
  HeatMap* heat_;
  QWidget* heatPanel_;
  QList<dpv::TensorInfo> tensors_;
};

}  // namespace gui
