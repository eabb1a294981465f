#pragma once
// A layout that places its items left to right and starts a new row when the next one does not
// fit: a row of controls that wraps on a narrow window instead of making the page scroll sideways.
#include <QLayout>
#include <QList>

namespace gui {

class FlowLayout : public QLayout {
 public:
  explicit FlowLayout(QWidget* parent = nullptr, int hSpacing = 8, int vSpacing = 4);
  ~FlowLayout() override;

  void addItem(QLayoutItem* item) override;
  int count() const override { return static_cast<int>(items_.size()); }
  QLayoutItem* itemAt(int index) const override { return items_.value(index); }
  QLayoutItem* takeAt(int index) override;
  Qt::Orientations expandingDirections() const override { return {}; }
  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override { return arrange(QRect(0, 0, width, 0), false); }
  QSize minimumSize() const override;  // the widest single item: narrower than that cannot be
  QSize sizeHint() const override;     // everything on one row
  void setGeometry(const QRect& rect) override;

 private:
  int arrange(const QRect& rect, bool apply) const;  // returns the height used
  QList<QLayoutItem*> items_;
  int hSpacing_;
  int vSpacing_;
};

}  // namespace gui
