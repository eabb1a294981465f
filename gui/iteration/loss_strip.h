#pragma once
// A small chart under the Iteration page's scene: loss.item() of every iteration of the current
// settings, as the engine computed it at the Loss stage (EngineController::losses), so the learner
// sees training happen on the fixed batch.
#include <QPointF>
#include <QVector>
#include <QWidget>

class QCustomPlot;
class QCPGraph;
class QLabel;

namespace gui {

class LossStrip : public QWidget {
  Q_OBJECT
 public:
  explicit LossStrip(QWidget* parent = nullptr);
  // Iteration i + 1 has loss losses[i]; an empty list clears the strip.
  void setLosses(const QVector<double>& losses);
  QVector<QPointF> points() const;  // (iteration, loss) as drawn
  QString caption() const;          // "iteration 3: loss 0.6512 (first 0.7100)"

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void applyPalette();
  QCustomPlot* plot_ = nullptr;
  QCPGraph* graph_ = nullptr;
  QLabel* caption_ = nullptr;
};

}  // namespace gui
