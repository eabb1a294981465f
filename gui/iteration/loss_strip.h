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

// Whose loss the engine's losses are: DataParallel gathers every output on device 0 and computes
// one loss over the whole batch; under DDP each rank computes its own shard's loss and the strip
// shows rank 0's (the losses are never averaged across ranks).
enum class LossMeaning { WholeBatch, RankZeroShard };

class LossStrip : public QWidget {
  Q_OBJECT
 public:
  explicit LossStrip(QWidget* parent = nullptr);
  // Iteration i + 1 has loss losses[i]; an empty list clears the strip.
  void setLosses(const QVector<double>& losses);
  // Whose loss it is: the loss axis's title and the caption say it.
  void setMeaning(LossMeaning meaning);
  QVector<QPointF> points() const;  // (iteration, loss) as drawn
  QString caption() const;          // "iteration 3: loss 0.6512 (first 0.7100)"
  QString xTitle() const;           // the axes' titles
  QString yTitle() const;
  QPointF yRange() const;           // (lower, upper) of the loss axis

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void applyPalette();
  QCustomPlot* plot_ = nullptr;
  QCPGraph* graph_ = nullptr;
  QLabel* caption_ = nullptr;
  QVector<double> losses_;
  LossMeaning meaning_ = LossMeaning::WholeBatch;
};

}  // namespace gui
