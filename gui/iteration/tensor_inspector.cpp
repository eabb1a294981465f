#include "gui/iteration/tensor_inspector.h"

#include <QHeaderView>
#include <QLabel>
#include <QTreeWidget>
#include <QVBoxLayout>

namespace gui {

TensorInspector::TensorInspector(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  headline_ = new QLabel(this);
  headline_->setObjectName(QStringLiteral("hintLabel"));
  headline_->setWordWrap(true);
  headline_->setTextFormat(Qt::RichText);
  tree_ = new QTreeWidget(this);
  tree_->setColumnCount(3);
  tree_->setHeaderLabels({tr("name"), tr("shape"), tr("first values")});
  tree_->setRootIsDecorated(false);
  tree_->setAlternatingRowColors(true);
  tree_->header()->setStretchLastSection(true);
  tree_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  layout->addWidget(headline_);
  layout->addWidget(tree_, 1);
  clear();
}

void TensorInspector::clear() {
  tree_->clear();
  tree_->setVisible(false);
  headline_->setText(tr("Click a chip in the picture to see its tensors: name, shape, dtype, device and the first values."));
}

int TensorInspector::rowCount() const { return tree_->topLevelItemCount(); }

QString TensorInspector::rowText(int row, int column) const {
  const QTreeWidgetItem* item = tree_->topLevelItem(row);
  return item ? item->text(column) : QString();
}

QString TensorInspector::headline() const { return headline_->text(); }

void TensorInspector::showChip(const ChipView& chip, const QString& deviceTitle) {
  tree_->clear();
  if (chip.tensors.isEmpty()) {
    tree_->setVisible(false);
    headline_->setText(tr("<b>%1</b> on %2. The engine's snapshot lists no tensor for it; the chip shows what the "
                          "stage reported.").arg(chip.text.toHtmlEscaped(), deviceTitle));
    return;
  }
  size_t bytes = 0;
  for (const auto& t : chip.tensors) bytes += t.bytes;
  const auto& first = chip.tensors.front();
  headline_->setText(tr("<b>%1</b> on %2 · %3 · %4 in %5 tensor(s)")
                         .arg(chip.text.toHtmlEscaped(), deviceTitle, QString::fromLatin1(dpv::dtype_name(first.dtype)),
                              formatBytes(static_cast<double>(bytes)))
                         .arg(chip.tensors.size()));
  for (const auto& t : chip.tensors) {
    QStringList values;
    for (size_t i = 0; i < t.head.size() && i < 4; ++i) values << QString::number(t.head[i], 'g', 4);
    if (t.head.size() > 4) values << QStringLiteral("…");
    auto* item = new QTreeWidgetItem({QString::fromStdString(t.name), formatShape(t.shape),
                                      QStringLiteral("[") + values.join(QStringLiteral(", ")) + QStringLiteral("]")});
    const QString tip = tr("%1: %2 %3, %4, role %5, device %6")
                            .arg(QString::fromStdString(t.name), formatShape(t.shape), QString::fromLatin1(dpv::dtype_name(t.dtype)),
                                 formatBytes(static_cast<double>(t.bytes)), QLatin1String(dpv::tensor_role_name(t.role)))
                            .arg(t.device < 0 ? tr("host") : QString::number(t.device));
    for (int c = 0; c < 3; ++c) item->setToolTip(c, tip);
    tree_->addTopLevelItem(item);
  }
  tree_->setVisible(true);
}

}  // namespace gui
