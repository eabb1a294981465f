#pragma once
// The ring drawn: world ranks on a circle, each holding the bucket cut into world chunks. A cell shows the
// chunk's first value as the engine's ring left it after the current step and how many ranks'
// gradients it already holds (shaded by that count; "Σ 0,1,3" names them). The step's moves are
// arrows from each rank to the next, labelled with the chunk and its bytes; the chunk each rank
// just received is outlined. Nothing here computes a value: frames come from course::run_ring_demo.
#include <QWidget>
#include <memory>

#include "course/ring_demo.h"

class QPainter;

namespace gui {

struct SceneColors;

class RingView : public QWidget {
  Q_OBJECT
 public:
  explicit RingView(QWidget* parent = nullptr);
  void setDemo(std::shared_ptr<const dpv::course::RingDemo> demo);
  void setFrame(int frame);
  int frame() const { return frame_; }
  void setTheme(const QString& theme);

  // For tests and the side panel: what the cell of `rank`'s chunk `chunk` shows in the current frame.
  double cellValue(int rank, int chunk) const;
  QString cellText(int rank, int chunk) const;
  int cellContributors(int rank, int chunk) const;

  QSize minimumSizeHint() const override { return {420, 260}; }
  // As last painted, for the layout tests: the smallest font drawn (points) and the cells whose
  // value did not fit even at that size.
  qreal smallestDrawnPt() const { return smallestDrawnPt_; }
  int cutCells() const { return cutCells_; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  // Where the ring and the grid go in the widget's current size; computed once per paint so the
  // drawing helpers below agree on it.
  struct Layout;
  Layout computeLayout() const;  // not layout(): that is QWidget's
  void drawMoves(QPainter& p, const Layout& l, const SceneColors& c) const;
  void drawMove(QPainter& p, const Layout& l, const SceneColors& c, const dpv::course::RingMove& m) const;
  void drawRanks(QPainter& p, const Layout& l, const SceneColors& c) const;
  void drawHeader(QPainter& p, const Layout& l, const SceneColors& c) const;
  void drawCells(QPainter& p, const Layout& l, const SceneColors& c) const;
  void drawCell(QPainter& p, const Layout& l, const SceneColors& c, int rank, int chunk, bool received) const;
  void drawCaption(QPainter& p, const Layout& l, const SceneColors& c) const;

  std::shared_ptr<const dpv::course::RingDemo> demo_;
  int frame_ = 0;
  QString theme_ = QStringLiteral("light");
  mutable qreal smallestDrawnPt_ = 0;  // painting records these (paintEvent is the only writer)
  mutable int cutCells_ = 0;
};

// "0.01234", "-1.2e-05": the short form of a value used in cells and the side panel.
QString shortValue(double v);

}  // namespace gui
