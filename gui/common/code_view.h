#pragma once
// The PyTorch code of the iteration, in two tabs: the user's training loop (the source document's
// sample, with the chosen model) and DataParallel.forward's own code. The line that the current
// stage executes is highlighted; Forward/Backward stages also mark the layer's line.
#include <QTabWidget>
#include <QVector>
#include <vector>

#include "gui/runtime/engine_types.h"

class QPlainTextEdit;

namespace dpv::course {
struct ProgramLine;
}

namespace gui {

struct CodeLine {
  QString text;
  QList<dpv::StageKind> stages;  // stages this line stands for
  int layer = -1;                // the model layer defined on this line
};

// Course program lines (course/sample_program.h) as the view's lines.
QVector<CodeLine> codeLinesOf(const std::vector<dpv::course::ProgramLine>& program);
// The user's program for a preset (course/sample_program.h): the seed's SimpleModel for "simple",
// an nn.Sequential otherwise.
QVector<CodeLine> userCodeLines(const QString& preset, bool syncBatchNorm, int batchSize, double lr, const QString& devices);
// DataParallel.forward (torch/nn/parallel/data_parallel.py, abridged) and what autograd runs after it.
QVector<CodeLine> dataParallelCodeLines();

class CodeView : public QTabWidget {
  Q_OBJECT
 public:
  explicit CodeView(QWidget* parent = nullptr);
  void setUserCode(const QVector<CodeLine>& lines);
  // Both tabs at once, with their titles (the Iteration page's DDP mode shows DDP's script and source).
  void setCode(const QString& userTitle, const QVector<CodeLine>& user, const QString& sourceTitle,
               const QVector<CodeLine>& source);
  // Highlights the lines of a stage (started == false: nothing is highlighted).
  void highlight(bool started, dpv::StageKind kind, int layer);
  // Line numbers (0-based) highlighted as the stage's line in a tab (0: user code, 1: DataParallel), -1: none.
  int highlightedLine(int tab) const { return highlighted_[tab]; }
  QString lineText(int tab, int line) const;
  QPlainTextEdit* editor(int tab) const { return editors_[tab]; }
  void setDark(bool dark);

 private:
  void fill(int tab, const QVector<CodeLine>& lines);
  void apply(int tab, bool started, dpv::StageKind kind, int layer);
  QPlainTextEdit* editors_[2] = {nullptr, nullptr};
  QVector<CodeLine> lines_[2];
  int highlighted_[2] = {-1, -1};
  bool started_ = false;
  dpv::StageKind kind_ = dpv::StageKind::Scatter;
  int layer_ = -1;
  bool dark_ = false;
};

}  // namespace gui
