#include "gui/memory/fits_panel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpression>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>
#include <cmath>

#include "engine/error.h"

namespace gui {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

QComboBox* editableCombo(QWidget* parent, const QStringList& items, const QString& current) {
  auto* box = new QComboBox(parent);
  box->setEditable(true);
  box->setInsertPolicy(QComboBox::NoInsert);
  box->addItems(items);
  box->setCurrentText(current);
  box->setMinimumContentsLength(7);
  return box;
}

}  // namespace

std::optional<int64_t> MemoryFitsPanel::parseParameterCount(const QString& text) {
  static const QRegularExpression pattern(QStringLiteral("^\\s*([0-9]*\\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\\s*([kKmMbBtT]?)\\s*$"));
  const QRegularExpressionMatch m = pattern.match(text);
  if (!m.hasMatch()) return std::nullopt;
  double value = m.captured(1).toDouble();
  const QString suffix = m.captured(2).toLower();
  if (suffix == QLatin1String("k")) value *= 1e3;
  if (suffix == QLatin1String("m")) value *= 1e6;
  if (suffix == QLatin1String("b")) value *= 1e9;
  if (suffix == QLatin1String("t")) value *= 1e12;
  // Up to 10^15 parameters: far beyond any model, and still exact in a double and an int64.
  if (!std::isfinite(value) || value < 1 || value > 1e15) return std::nullopt;
  return static_cast<int64_t>(std::llround(value));
}

std::optional<double> MemoryFitsPanel::parseGibibytes(const QString& text) {
  static const QRegularExpression pattern(QStringLiteral("^\\s*([0-9]*\\.?[0-9]+)\\s*(?:GiB|GB|G)?\\s*$"),
                                          QRegularExpression::CaseInsensitiveOption);
  const QRegularExpressionMatch m = pattern.match(text);
  if (!m.hasMatch()) return std::nullopt;
  const double gib = m.captured(1).toDouble();
  if (!(gib > 0) || gib > 1e6) return std::nullopt;
  return gib;
}

MemoryFitsPanel::MemoryFitsPanel(QWidget* parent) : QWidget(parent) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  note_ = new QLabel(this);
  note_->setObjectName(QStringLiteral("fitsFormulaNote"));
  note_->setWordWrap(true);
  note_->setTextFormat(Qt::RichText);
  note_->setText(tr("<b>A formula, not a run:</b> each strategy's model state per parameter as measured above (parameters, "
                    "gradients, optimizer state, DDP's buckets, FSDP's gathered parameter; buffers, the batch and activations "
                    "left out), what every GPU holds whole and what is sharded, scaled to the model size and spread over the "
                    "GPUs as the strategy spreads it. A real batch's activations come on top."));
  outer->addWidget(note_);

  auto* controls = new QHBoxLayout();
  controls->addWidget(new QLabel(tr("Model parameters"), this));
  modelSize_ = editableCombo(this, {QStringLiteral("125M"), QStringLiteral("350M"), QStringLiteral("1.3B"), QStringLiteral("7B"),
                                    QStringLiteral("13B"), QStringLiteral("70B")}, QStringLiteral("7B"));
  modelSize_->setToolTip(tr("Pick one or type a count: 1.3B, 125M, 7e9"));
  controls->addWidget(modelSize_);
  controls->addWidget(new QLabel(tr("GPUs"), this));
  gpus_ = new QSpinBox(this);
  gpus_->setRange(1, 100000);
  gpus_->setValue(8);
  controls->addWidget(gpus_);
  controls->addWidget(new QLabel(tr("GPU memory (GiB)"), this));
  gpuMemory_ = editableCombo(this, {QStringLiteral("24"), QStringLiteral("40"), QStringLiteral("80"), QStringLiteral("141")},
                             QStringLiteral("80"));
  controls->addWidget(gpuMemory_);
  controls->addStretch(1);
  outer->addLayout(controls);

  problem_ = new QLabel(this);
  problem_->setObjectName(QStringLiteral("hintLabel"));
  problem_->setWordWrap(true);
  outer->addWidget(problem_);

  table_ = new QTableWidget(0, 3, this);
  table_->setObjectName(QStringLiteral("fitsTable"));
  table_->setHorizontalHeaderLabels({tr("strategy"), tr("model state per GPU (at the peak)"), tr("verdict")});
  table_->verticalHeader()->setVisible(false);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionMode(QAbstractItemView::NoSelection);
  table_->setFixedHeight(table_->horizontalHeader()->sizeHint().height() + 4 * table_->verticalHeader()->defaultSectionSize() + 6);
  outer->addWidget(table_);

  connect(modelSize_, &QComboBox::currentTextChanged, this, &MemoryFitsPanel::update);
  connect(gpuMemory_, &QComboBox::currentTextChanged, this, &MemoryFitsPanel::update);
  connect(gpus_, &QSpinBox::valueChanged, this, &MemoryFitsPanel::update);
  update();
}

void MemoryFitsPanel::setMeasured(const MemoryResult& measured) {
  measured_ = measured;
  update();
}

void MemoryFitsPanel::setModelSize(const QString& text) { modelSize_->setCurrentText(text); }
void MemoryFitsPanel::setGpuCount(int gpus) { gpus_->setValue(gpus); }
void MemoryFitsPanel::setGpuMemory(const QString& gibText) { gpuMemory_->setCurrentText(gibText); }
QString MemoryFitsPanel::noteText() const { return note_->text(); }
QString MemoryFitsPanel::problemText() const { return problem_->text(); }

void MemoryFitsPanel::showProblem(const QString& text) {
  estimates_.clear();
  table_->setRowCount(0);
  problem_->setText(text);
  problem_->setVisible(!text.isEmpty());
  emit estimated();
}

void MemoryFitsPanel::update() {
  const std::optional<int64_t> parameters = parseParameterCount(modelSize_->currentText());
  const std::optional<double> gib = parseGibibytes(gpuMemory_->currentText());
  if (!measured_) return showProblem(tr("Run the comparison above first: the estimate scales what it measures."));
  if (!parameters) return showProblem(tr("“%1” is not a parameter count: type a number, optionally with K, M, B or T (1.3B, 125M).")
                                          .arg(modelSize_->currentText()));
  if (!gib) return showProblem(tr("“%1” is not a GPU memory size: type a number of GiB (24, 80, 141).").arg(gpuMemory_->currentText()));
  try {
    estimates_ = dpv::course::what_fits(*measured_, *parameters, gpus_->value(), *gib * kGiB);
  } catch (const dpv::Error& e) {
    return showProblem(QString::fromStdString(e.full()));
  }
  problem_->clear();
  problem_->setVisible(false);
  table_->setRowCount(static_cast<int>(estimates_.size()));
  for (int row = 0; row < static_cast<int>(estimates_.size()); ++row) {
    const dpv::course::FitEstimate& e = estimates_[static_cast<size_t>(row)];
    auto* name = new QTableWidgetItem(QString::fromLatin1(dpv::strategy_short_name(e.strategy)));
    // In GiB, the unit the GPU memory is picked in.
    const auto gib = [](double b) { return QString::number(b / kGiB, 'f', b < 10 * kGiB ? 2 : 1); };
    QString text = tr("%1 GiB").arg(gib(e.bytes_per_gpu));
    if (e.transient_bytes_per_gpu > 0) text += tr(" at the peak, %1 GiB between iterations").arg(gib(e.persistent_bytes_per_gpu));
    auto* bytes = new QTableWidgetItem(text + (e.is_formula ? tr(" (formula)") : QString()));
    bytes->setData(Qt::UserRole, e.bytes_per_gpu);
    if (e.transient_bytes_per_gpu > 0)
      bytes->setToolTip(tr("%1 GiB of the peak is the full flat parameter and gradient gathered for the forward and "
                           "backward: dpviz wraps the whole model as one FSDP unit, so all of it is gathered at once; "
                           "with one FSDP unit per layer only a layer at a time would be.")
                            .arg(gib(e.transient_bytes_per_gpu)));
    auto* verdict = new QTableWidgetItem(e.fits ? tr("fits") : tr("does not fit"));
    verdict->setData(Qt::UserRole, e.fits);
    verdict->setForeground(e.fits ? QColor(0x3f, 0xa3, 0x5b) : QColor(0xd4, 0x4b, 0x4b));
    table_->setItem(row, 0, name);
    table_->setItem(row, 1, bytes);
    table_->setItem(row, 2, verdict);
  }
  emit estimated();
}

}  // namespace gui
