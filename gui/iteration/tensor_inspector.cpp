#include "gui/iteration/tensor_inspector.h"

#include <QHeaderView>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollArea>
#include <QSplitter>
#include <QToolTip>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <cmath>

namespace gui {

namespace {

int64_t numelOf(const dpv::Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

QString valuesText(const dpv::TensorInfo& t) {
  QStringList values;
  for (size_t i = 0; i < t.head.size() && i < 6; ++i) values << QString::number(t.head[i], 'g', 4);
  if (numelOf(t.shape) > static_cast<int64_t>(values.size())) values << QStringLiteral("…");
  return QStringLiteral("[") + values.join(QStringLiteral(", ")) + QStringLiteral("]");
}

}  // namespace

// ---------------------------------------------------------------- HeatMap

HeatMap::HeatMap(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

bool HeatMap::setTensor(const dpv::TensorInfo& t) {
  const int64_t n = numelOf(t.shape);
  if (n <= 0 || n > static_cast<int64_t>(dpv::kSnapshotAllValues) || static_cast<int64_t>(t.head.size()) != n) {
    clear();
    return false;
  }
  values_ = t.head;
  cols_ = t.shape.empty() ? 1 : static_cast<int>(t.shape.back());
  rows_ = static_cast<int>(n / std::max(1, cols_));
  scale_ = 0;
  for (double v : values_) scale_ = std::max(scale_, std::abs(v));
  if (scale_ == 0) scale_ = 1;
  updateGeometry();
  update();
  return true;
}

void HeatMap::clear() {
  values_.clear();
  rows_ = cols_ = 0;
  update();
}

QSize HeatMap::sizeHint() const { return QSize(std::max(120, cols_ * 18), std::max(24, rows_ * 18)); }
QSize HeatMap::minimumSizeHint() const { return QSize(60, std::min(60, std::max(12, rows_ * 6))); }

QColor HeatMap::cellColor(int row, int column) const {
  const size_t i = static_cast<size_t>(row) * static_cast<size_t>(cols_) + static_cast<size_t>(column);
  if (i >= values_.size()) return {};
  const double t = std::clamp(values_[i] / scale_, -1.0, 1.0);
  // Diverging: white at 0, red for positive, blue for negative (readable in both themes).
  const QColor hot(0xd6, 0x3a, 0x2f), cold(0x2f, 0x6f, 0xd6), zero(0xf7, 0xf7, 0xf7);
  const QColor& end = t >= 0 ? hot : cold;
  const double a = std::abs(t);
  return QColor::fromRgbF(static_cast<float>(zero.redF() + (end.redF() - zero.redF()) * a),
                          static_cast<float>(zero.greenF() + (end.greenF() - zero.greenF()) * a),
                          static_cast<float>(zero.blueF() + (end.blueF() - zero.blueF()) * a));
}

QRectF HeatMap::cellRect(int row, int column) const {
  const qreal w = std::min<qreal>(28, static_cast<qreal>(width()) / std::max(1, cols_));
  const qreal h = std::min<qreal>(22, static_cast<qreal>(height()) / std::max(1, rows_));
  return QRectF(column * w, row * h, w, h);
}

void HeatMap::paintEvent(QPaintEvent*) {
  if (values_.empty()) return;
  QPainter p(this);
  QFont f = font();
  f.setPixelSize(9);
  p.setFont(f);
  for (int r = 0; r < rows_; ++r) {
    for (int c = 0; c < cols_; ++c) {
      const QRectF cell = cellRect(r, c);
      p.fillRect(cell.adjusted(0, 0, -1, -1), cellColor(r, c));
      // The value itself where the cell is wide enough to read it.
      if (cell.width() >= 26 && cell.height() >= 12) {
        p.setPen(QColor(0x1d, 0x23, 0x2b));
        p.drawText(cell, Qt::AlignCenter, QString::number(values_[static_cast<size_t>(r * cols_ + c)], 'f', 1));
      }
    }
  }
}

void HeatMap::mouseMoveEvent(QMouseEvent* event) {
  for (int r = 0; r < rows_; ++r) {
    for (int c = 0; c < cols_; ++c) {
      if (cellRect(r, c).contains(event->position())) {
        QToolTip::showText(event->globalPosition().toPoint(),
                           tr("[%1, %2] = %3").arg(r).arg(c).arg(values_[static_cast<size_t>(r * cols_ + c)], 0, 'g', 6), this);
        return;
      }
    }
  }
  QToolTip::hideText();
}

// ---------------------------------------------------------------- TensorInspector

TensorInspector::TensorInspector(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  headline_ = new QLabel(this);
  headline_->setObjectName(QStringLiteral("hintLabel"));
  headline_->setWordWrap(true);
  headline_->setTextFormat(Qt::RichText);
  headline_->setAlignment(Qt::AlignLeft | Qt::AlignTop);  // at the top while the list below is hidden
  // Two lines (a DDP headline wraps in the side column): the splitter above keeps the panel at
  // least its minimum size hint, which a wrapped label's one-line minimum would leave too short.
  headline_->setMinimumHeight(headline_->fontMetrics().lineSpacing() * 2);
  layout->addWidget(headline_);

  // The list and the selected tensor's details share the panel through a splitter.
  split_ = new QSplitter(Qt::Vertical, this);
  split_->setChildrenCollapsible(false);
  tree_ = new QTreeWidget(split_);
  tree_->setColumnCount(4);
  tree_->setHeaderLabels({tr("name"), tr("shape"), tr("bytes"), tr("values")});
  tree_->setRootIsDecorated(false);
  tree_->setAlternatingRowColors(true);
  tree_->setUniformRowHeights(true);
  tree_->setWordWrap(false);
  tree_->setTextElideMode(Qt::ElideRight);
  QFont rowFont = tree_->font();
  rowFont.setPixelSize(std::max(13, rowFont.pixelSize()));
  tree_->setFont(rowFont);
  tree_->header()->setStretchLastSection(true);
  tree_->header()->setSectionResizeMode(QHeaderView::Interactive);
  // The header and two rows: with the heat map's minimum below, the side panels fit a 1024x640
  // window without pushing the Iteration page's stepper below the fold.
  tree_->setMinimumHeight(56);
  connect(tree_, &QTreeWidget::currentItemChanged, this, &TensorInspector::onRowChanged);
  split_->addWidget(tree_);

  heatPanel_ = new QWidget(split_);
  auto* heatLayout = new QVBoxLayout(heatPanel_);
  heatLayout->setContentsMargins(0, 4, 0, 0);
  // Why the device holds the tensor and the heat map's title: lines that scroll when the panel is
  // short (in a small window bare wrapped labels got less height than their text and overlapped).
  auto* whyScroll = new QScrollArea(heatPanel_);
  whyScroll->setFrameShape(QFrame::NoFrame);
  whyScroll->setWidgetResizable(true);
  whyScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  whyScroll->viewport()->setAutoFillBackground(false);
  auto* whyBox = new QWidget(whyScroll);
  whyBox->setAutoFillBackground(false);
  auto* whyLayout = new QVBoxLayout(whyBox);
  whyLayout->setContentsMargins(0, 0, 0, 0);
  whyLayout->setSpacing(2);
  why_ = new QLabel(whyBox);
  why_->setWordWrap(true);
  why_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  heatTitle_ = new QLabel(whyBox);
  heatTitle_->setObjectName(QStringLiteral("hintLabel"));
  heatTitle_->setWordWrap(true);
  whyLayout->addWidget(why_);
  whyLayout->addWidget(heatTitle_);
  whyLayout->addStretch(1);
  whyScroll->setWidget(whyBox);
  whyScroll->setMinimumHeight(why_->fontMetrics().lineSpacing() * 2 + 4);
  heat_ = new HeatMap(heatPanel_);
  heat_->setMinimumHeight(24);
  heatLayout->addWidget(whyScroll, 1);
  heatLayout->addWidget(heat_, 1);
  split_->addWidget(heatPanel_);
  split_->setStretchFactor(0, 1);
  split_->setStretchFactor(1, 1);
  layout->addWidget(split_, 1);
  clear();
}

void TensorInspector::clear() {
  tree_->clear();
  tensors_.clear();
  split_->setVisible(false);
  heat_->clear();
  why_->clear();
  heatTitle_->clear();
  headline_->setText(tr("Click a chip in the picture to see its tensors: name, shape, bytes, values, why the device "
                        "holds them, and a heat map of small ones. Hover a chip for a quick look."));
}

int TensorInspector::rowCount() const { return tree_->topLevelItemCount(); }

QString TensorInspector::rowText(int row, int column) const {
  const QTreeWidgetItem* item = tree_->topLevelItem(row);
  return item ? item->text(column) : QString();
}

QString TensorInspector::headline() const { return headline_->text(); }

QString TensorInspector::whyText() const { return why_->text(); }

void TensorInspector::selectRow(int row) {
  if (QTreeWidgetItem* item = tree_->topLevelItem(row)) tree_->setCurrentItem(item);
}

void TensorInspector::onRowChanged() {
  const int row = tree_->currentItem() ? tree_->indexOfTopLevelItem(tree_->currentItem()) : -1;
  if (row < 0 || row >= tensors_.size()) {
    heat_->clear();
    why_->clear();
    heatTitle_->clear();
    return;
  }
  const dpv::TensorInfo& t = tensors_[row];
  why_->setText(QString::fromStdString(t.why));
  if (heat_->setTensor(t)) {
    heatTitle_->setText(tr("every value of %1: blue < 0 < red").arg(formatShape(t.shape)));
    heat_->setVisible(true);
  } else {
    heatTitle_->setText(tr("%1 values: too many to keep, the first are listed").arg(numelOf(t.shape)));
    heat_->setVisible(false);
  }
}

void TensorInspector::fillRows(const QList<dpv::TensorInfo>& tensors) {
  for (const auto& t : tensors) {
    auto* item = new QTreeWidgetItem({QString::fromStdString(t.name), formatShape(t.shape),
                                      t.view ? tr("view") : formatBytes(static_cast<double>(t.bytes)), valuesText(t)});
    const QString tip = tr("%1: %2 %3, %4, role %5, device %6\n%7")
                            .arg(QString::fromStdString(t.name), formatShape(t.shape), QString::fromLatin1(dpv::dtype_name(t.dtype)),
                                 formatBytes(static_cast<double>(t.bytes)), QLatin1String(dpv::tensor_role_name(t.role)))
                            .arg(t.device < 0 ? tr("host") : QString::number(t.device))
                            .arg(QString::fromStdString(t.why));
    for (int c = 0; c < 4; ++c) item->setToolTip(c, tip);
    tree_->addTopLevelItem(item);
  }
  for (int c = 0; c < 3; ++c) tree_->resizeColumnToContents(c);
}

void TensorInspector::showRows(const QString& headline, const QList<dpv::TensorInfo>& tensors, int selected) {
  tree_->clear();
  tensors_ = tensors;
  headline_->setText(headline);
  split_->setVisible(!tensors.isEmpty());
  fillRows(tensors);
  selectRow(selected);
}

void TensorInspector::showChip(const ChipView& chip, const QString& deviceTitle) {
  tree_->clear();
  tensors_.clear();
  if (chip.tensors.isEmpty()) {
    split_->setVisible(false);
    headline_->setText(tr("<b>%1</b> on %2. The engine's snapshot lists no tensor for it; the chip shows what the "
                          "stage reported.").arg(chip.text.toHtmlEscaped(), deviceTitle));
    return;
  }
  tensors_ = chip.tensors;
  split_->setVisible(true);  // clear() hid the list and the heat map; a chip with tensors shows them
  size_t bytes = 0;
  for (const auto& t : chip.tensors) {
    if (!t.view) bytes += t.bytes;
  }
  const auto& first = chip.tensors.front();
  headline_->setText(tr("<b>%1</b> on %2 · %3 · %4 of %5 memory in %6 tensor(s)")
                         .arg(chip.text.toHtmlEscaped(), deviceTitle, QString::fromLatin1(dpv::dtype_name(first.dtype)),
                              formatBytes(static_cast<double>(bytes)), QLatin1String(dpv::memory_kind_name(chip.kind)))
                         .arg(chip.tensors.size()));
  fillRows(chip.tensors);
  // The newest tensor is the one the stage just made (the last activation, the summed gradient).
  selectRow(static_cast<int>(chip.tensors.size()) - 1);
}

}  // namespace gui
