#include "gui/common/code_view.h"

#include <QFontDatabase>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QTextBlock>

#include "course/sample_program.h"
#include "engine/error.h"

namespace gui {

using K = dpv::StageKind;

QVector<CodeLine> codeLinesOf(const std::vector<dpv::course::ProgramLine>& program) {
  QVector<CodeLine> out;
  for (const auto& line : program) {
    out.append(CodeLine{QString::fromStdString(line.text), QList<K>(line.stages.begin(), line.stages.end()), line.layer});
  }
  return out;
}

QVector<CodeLine> userCodeLines(const QString& preset, bool syncBatchNorm, int batchSize, double lr, const QString& devices) {
  dpv::course::ProgramOptions options;
  options.preset = preset.toStdString();
  options.sync_bn = syncBatchNorm;
  options.batch = batchSize;
  options.lr = lr;
  options.devices = devices.toStdString();
  std::vector<dpv::course::ProgramLine> program;
  try {
    program = dpv::course::sample_program(options);
  } catch (const dpv::Error&) {
    options.preset = dpv::course::kSamplePreset;  // an unknown preset shows the seed's own program
    program = dpv::course::sample_program(options);
  }
  return codeLinesOf(program);
}

QVector<CodeLine> dataParallelCodeLines() {
  QVector<CodeLine> out;
  auto add = [&](const QString& text, QList<K> stages = {}) { out.append(CodeLine{text, stages, -1}); };
  add(QStringLiteral("# torch/nn/parallel/data_parallel.py (abridged)"));
  add(QStringLiteral("def forward(self, *inputs, **kwargs):"));
  add(QStringLiteral("    inputs, kwargs = self.scatter(inputs, kwargs, self.device_ids)"), {K::Scatter});
  add(QStringLiteral("    if len(self.device_ids) == 1:"));
  add(QStringLiteral("        return self.module(*inputs[0], **kwargs[0])"));
  add(QStringLiteral("    replicas = self.replicate(self.module, self.device_ids[:len(inputs)])"), {K::Replicate});
  add(QStringLiteral("    outputs = self.parallel_apply(replicas, inputs, kwargs)"), {K::Forward});
  add(QStringLiteral("    return self.gather(outputs, self.output_device)"), {K::Gather});
  add(QString());
  add(QStringLiteral("# outside DataParallel, on the output device:"));
  add(QStringLiteral("#   loss = criterion(outputs, labels)"), {K::Loss});
  add(QString());
  add(QStringLiteral("# loss.backward() runs the backward of each piece above:"));
  add(QStringLiteral("#   Gather.backward    -> Scatter.apply(grad_output)"), {K::GradScatter});
  add(QStringLiteral("#   replica layers     -> backward, last layer first"), {K::Backward});
  add(QStringLiteral("#   Broadcast.backward -> ReduceAddCoalesced onto device 0"), {K::ReduceGrads});
  add(QString());
  add(QStringLiteral("# optimizer.step() updates the original module on device 0"), {K::Step});
  return out;
}

CodeView::CodeView(QWidget* parent) : QTabWidget(parent) {
  const QString titles[2] = {tr("Your code"), tr("DataParallel.forward")};
  for (int tab = 0; tab < 2; ++tab) {
    auto* edit = new QPlainTextEdit(this);
    edit->setObjectName(QStringLiteral("codeView"));
    edit->setReadOnly(true);
    // Code is never wrapped (a wrapped line of Python reads as two statements); long lines scroll.
    edit->setLineWrapMode(QPlainTextEdit::NoWrap);
    edit->setWordWrapMode(QTextOption::NoWrap);
    QFont mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
    mono.setPixelSize(12);
    edit->setFont(mono);
    editors_[tab] = edit;
    addTab(edit, titles[tab]);
  }
  fill(1, dataParallelCodeLines());
  fill(0, userCodeLines(QStringLiteral("simple"), false, 10, 0.01, QStringLiteral("cpu:4")));
}

void CodeView::fill(int tab, const QVector<CodeLine>& lines) {
  lines_[tab] = lines;
  QStringList text;
  for (const auto& l : lines) text << l.text;
  editors_[tab]->setPlainText(text.join(QLatin1Char('\n')));
  apply(tab, started_, kind_, layer_);
}

void CodeView::setUserCode(const QVector<CodeLine>& lines) { fill(0, lines); }

void CodeView::setCode(const QString& userTitle, const QVector<CodeLine>& user, const QString& sourceTitle,
                       const QVector<CodeLine>& source) {
  setTabText(0, userTitle);
  setTabText(1, sourceTitle);
  fill(0, user);
  fill(1, source);
}

QString CodeView::lineText(int tab, int line) const {
  if (line < 0 || line >= lines_[tab].size()) return QString();
  return lines_[tab][line].text;
}

void CodeView::setDark(bool dark) {
  dark_ = dark;
  for (int tab = 0; tab < 2; ++tab) apply(tab, started_, kind_, layer_);
}

void CodeView::highlight(bool started, dpv::StageKind kind, int layer) {
  started_ = started;
  kind_ = kind;
  layer_ = layer;
  for (int tab = 0; tab < 2; ++tab) apply(tab, started, kind, layer);
}

void CodeView::apply(int tab, bool started, dpv::StageKind kind, int layer) {
  QPlainTextEdit* edit = editors_[tab];
  QList<QTextEdit::ExtraSelection> selections;
  highlighted_[tab] = -1;
  const bool layerStage = kind == K::Forward || kind == K::Backward;
  for (int i = 0; started && i < lines_[tab].size(); ++i) {
    const CodeLine& line = lines_[tab][i];
    const bool stageLine = line.stages.contains(kind);
    const bool layerLine = layerStage && layer >= 0 && line.layer == layer;
    if (!stageLine && !layerLine) continue;
    QTextEdit::ExtraSelection sel;
    sel.cursor = QTextCursor(edit->document()->findBlockByNumber(i));
    sel.cursor.movePosition(QTextCursor::EndOfBlock, QTextCursor::KeepAnchor);  // every wrapped line of the block
    sel.format.setProperty(QTextFormat::FullWidthSelection, true);
    sel.format.setBackground(stageLine ? QColor(0x2f, 0x6f, 0xd6, 150) : QColor(0x3f, 0xa3, 0x5b, 110));
    sel.format.setForeground(QColor(0xff, 0xff, 0xff));
    selections.append(sel);
    if (stageLine && highlighted_[tab] < 0) highlighted_[tab] = i;
  }
  edit->setExtraSelections(selections);
  if (highlighted_[tab] >= 0) {
    QTextCursor cursor(edit->document()->findBlockByNumber(highlighted_[tab]));
    edit->setTextCursor(cursor);
    edit->centerCursor();  // the stage's line in the middle, with context above and below
    edit->horizontalScrollBar()->setValue(0);
  }
}

}  // namespace gui
