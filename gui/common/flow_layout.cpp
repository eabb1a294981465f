#include "gui/common/flow_layout.h"

#include <QWidget>
#include <algorithm>

namespace gui {

FlowLayout::FlowLayout(QWidget* parent, int hSpacing, int vSpacing)
    : QLayout(parent), hSpacing_(hSpacing), vSpacing_(vSpacing) {
  setContentsMargins(0, 0, 0, 0);
}

FlowLayout::~FlowLayout() {
  while (QLayoutItem* item = takeAt(0)) delete item;
}

void FlowLayout::addItem(QLayoutItem* item) { items_.append(item); }

QLayoutItem* FlowLayout::takeAt(int index) {
  return index >= 0 && index < items_.size() ? items_.takeAt(index) : nullptr;
}

QSize FlowLayout::minimumSize() const {
  QSize size;
  for (const QLayoutItem* item : items_) size = size.expandedTo(item->minimumSize());
  const QMargins m = contentsMargins();
  return size + QSize(m.left() + m.right(), m.top() + m.bottom());
}

QSize FlowLayout::sizeHint() const {
  int width = 0, height = 0;
  for (const QLayoutItem* item : items_) {
    if (item->isEmpty()) continue;
    width += (width > 0 ? hSpacing_ : 0) + item->sizeHint().width();
    height = std::max(height, item->sizeHint().height());
  }
  const QMargins m = contentsMargins();
  return {width + m.left() + m.right(), height + m.top() + m.bottom()};
}

void FlowLayout::setGeometry(const QRect& rect) {
  QLayout::setGeometry(rect);
  arrange(rect, true);
}

int FlowLayout::arrange(const QRect& rect, bool apply) const {
  const QRect area = rect.marginsRemoved(contentsMargins());
  int x = area.x(), y = area.y(), rowHeight = 0;
  // Items of a row share its height and are centred in it (a label beside a taller spin box).
  QList<std::pair<QLayoutItem*, QPoint>> row;
  auto placeRow = [&] {
    if (apply)
      for (auto& [item, pos] : row) {
        const QSize s = item->sizeHint();
        item->setGeometry(QRect(QPoint(pos.x(), pos.y() + (rowHeight - s.height()) / 2), s));
      }
    row.clear();
  };
  for (QLayoutItem* item : items_) {
    if (item->isEmpty()) continue;
    const QSize s = item->sizeHint();
    if (x > area.x() && x + s.width() > area.right() + 1) {  // does not fit: a new row
      placeRow();
      x = area.x();
      y += rowHeight + vSpacing_;
      rowHeight = 0;
    }
    row.append({item, QPoint(x, y)});
    x += s.width() + hSpacing_;
    rowHeight = std::max(rowHeight, s.height());
  }
  placeRow();
  const QMargins m = contentsMargins();
  return y + rowHeight - rect.y() + m.bottom();
}

}  // namespace gui
