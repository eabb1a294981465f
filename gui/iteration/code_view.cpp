#include "gui/iteration/code_view.h"

#include <QFontDatabase>
#include <QPlainTextEdit>
#include <QTextBlock>

#include "engine/error.h"
#include "engine/model_spec.h"

namespace gui {

namespace {

using K = dpv::StageKind;

QString layerCode(const dpv::LayerSpec& l, bool sync) {
  if (l.type == "linear") {
    return QStringLiteral("nn.Linear(%1, %2%3)").arg(l.in_features).arg(l.out_features).arg(l.bias ? QString() : QStringLiteral(", bias=False"));
  }
  if (l.type == "relu") return QStringLiteral("nn.ReLU()");
  if (l.type == "flatten") return QStringLiteral("nn.Flatten()");
  if (l.type == "conv2d") {
    return QStringLiteral("nn.Conv2d(%1, %2, kernel_size=%3, stride=%4, padding=%5)")
        .arg(l.in_channels).arg(l.out_channels).arg(l.kernel_size).arg(l.stride).arg(l.padding);
  }
  if (l.type == "batchnorm1d" || l.type == "batchnorm2d") {
    if (sync) return QStringLiteral("nn.SyncBatchNorm(%1)").arg(l.num_features);
    return QStringLiteral("nn.%1(%2)").arg(l.type == "batchnorm1d" ? QStringLiteral("BatchNorm1d") : QStringLiteral("BatchNorm2d")).arg(l.num_features);
  }
  return QString::fromStdString(l.type);
}

}  // namespace

QVector<CodeLine> userCodeLines(const QString& preset, bool syncBatchNorm, int batchSize, double lr, const QString& devices) {
  QVector<CodeLine> out;
  auto add = [&](const QString& text, QList<K> stages = {}, int layer = -1) { out.append(CodeLine{text, stages, layer}); };
  dpv::ModelSpec spec;
  try {
    spec = dpv::preset_model(preset.toStdString());
  } catch (const dpv::Error&) {
    spec = dpv::preset_model("simple");
  }
  add(QStringLiteral("import torch"));
  add(QStringLiteral("import torch.nn as nn"));
  add(QStringLiteral("import torch.optim as optim"));
  add(QString());
  QString inputShape = QStringLiteral("%1, %2").arg(batchSize).arg(spec.layers.empty() ? 0 : spec.layers.front().in_features);
  if (!spec.layers.empty() && spec.layers.front().type == "conv2d") {
    inputShape = QStringLiteral("%1, %2, 32, 32").arg(batchSize).arg(spec.layers.front().in_channels);
  }
  int64_t classes = 2;
  for (const auto& l : spec.layers) {
    if (l.type == "linear") classes = l.out_features;
  }
  if (preset == QLatin1String("simple")) {
    add(QStringLiteral("class SimpleModel(nn.Module):"));
    add(QStringLiteral("    def __init__(self):"));
    add(QStringLiteral("        super().__init__()"));
    add(QStringLiteral("        self.linear = %1").arg(layerCode(spec.layers.front(), false)), {}, 0);
    add(QStringLiteral("    def forward(self, x):"));
    add(QStringLiteral("        return self.linear(x)"));
    add(QString());
    add(QStringLiteral("model = SimpleModel().cuda()"));
  } else {
    add(QStringLiteral("model = nn.Sequential("));
    for (size_t i = 0; i < spec.layers.size(); ++i) {
      add(QStringLiteral("    %1,").arg(layerCode(spec.layers[i], syncBatchNorm)), {}, static_cast<int>(i));
    }
    add(QStringLiteral(").cuda()"));
  }
  add(QStringLiteral("# devices: %1").arg(devices));
  add(QStringLiteral("model = nn.DataParallel(model)"));
  add(QStringLiteral("criterion = nn.CrossEntropyLoss()"));
  add(QStringLiteral("optimizer = optim.SGD(model.parameters(), lr=%1)").arg(lr));
  add(QString());
  add(QStringLiteral("inputs = torch.randn(%1).cuda()").arg(inputShape));
  add(QStringLiteral("labels = torch.randint(0, %1, (%2,)).cuda()").arg(classes).arg(batchSize));
  add(QString());
  add(QStringLiteral("# scatter, replicate, forward, gather:"));
  add(QStringLiteral("outputs = model(inputs)"), {K::Scatter, K::Replicate, K::Forward, K::Gather});
  add(QStringLiteral("# on device 0:"));
  add(QStringLiteral("loss = criterion(outputs, labels)"), {K::Loss});
  add(QStringLiteral("optimizer.zero_grad()"));
  add(QStringLiteral("# grads flow back, summed on device 0:"));
  add(QStringLiteral("loss.backward()"), {K::GradScatter, K::Backward, K::ReduceGrads});
  add(QStringLiteral("# SGD on device 0 only:"));
  add(QStringLiteral("optimizer.step()"), {K::Step});
  add(QString());
  add(QStringLiteral("print(f\"Loss: {loss.item():.4f}\")"));
  return out;
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
    // Wrapped, so the code reads without sideways scrolling in the narrow side panel.
    edit->setLineWrapMode(QPlainTextEdit::WidgetWidth);
    edit->setWordWrapMode(QTextOption::WrapAtWordBoundaryOrAnywhere);
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
  }
}

}  // namespace gui
