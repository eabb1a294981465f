#include "gui/app/settings_bar.h"

#include <QComboBox>
#include <algorithm>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>

#include "course/sample_program.h"
#include "engine/backend_registry.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/model_spec.h"

namespace gui {

QStringList deviceChoices() {
  QStringList choices;
  for (int k = 1; k <= 8; ++k) choices << QStringLiteral("cpu:%1").arg(k);
  if (dpv::cuda_available()) {
    const int n = dpv::cuda_device_count();
    if (n > 0) {
      choices << QStringLiteral("cuda");
      for (int g = 0; g < n; ++g) choices << QStringLiteral("cuda:%1").arg(g);
      choices << QStringLiteral("cuda:0x2") << QStringLiteral("cuda:0x4");
    }
  }
  return choices;
}

namespace {

QString presetLabel(const QString& name) {
  if (name == QLatin1String("simple")) return QObject::tr("SimpleModel (the sample)");
  if (name == QLatin1String("mlp-bn")) return QObject::tr("MLP + BatchNorm");
  if (name == QLatin1String("cnn")) return QObject::tr("Small CNN");
  if (name == QLatin1String("mnist-mlp")) return QObject::tr("MNIST-size MLP");
  if (name == QLatin1String("mlp-large")) return QObject::tr("Large MLP + BatchNorm");
  if (name == QLatin1String("gpu-mlp")) return QObject::tr("GPU benchmark MLP (1000 classes)");
  return name;
}

QString deviceLabel(const QString& spec) {
  if (spec.startsWith(QLatin1String("cpu:"))) {
    const int k = spec.mid(4).toInt();
    return k == 1 ? QObject::tr("1 simulated GPU (CPU)") : QObject::tr("%1 simulated GPUs (CPU)").arg(k);
  }
  if (spec == QLatin1String("cuda")) return QObject::tr("every GPU (cuda)");
  return spec;
}

QLabel* caption(const QString& text, QWidget* parent) {
  auto* l = new QLabel(text, parent);
  l->setObjectName(QStringLiteral("hintLabel"));
  return l;
}

}  // namespace

SettingsBar::SettingsBar(AppContext* context, QWidget* parent) : QFrame(parent), context_(context) {
  setObjectName(QStringLiteral("settingsBar"));
  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(10, 6, 10, 6);
  row->setSpacing(6);

  devices_ = new QComboBox(this);
  for (const QString& spec : deviceChoices()) devices_->addItem(deviceLabel(spec), spec);
  devices_->setToolTip(tr("Devices DataParallel splits the batch over. Simulated devices run on CPU threads."));
  preset_ = new QComboBox(this);
  preset_->setObjectName(QStringLiteral("presetBox"));
  for (const auto& name : dpv::preset_names()) preset_->addItem(presetLabel(QString::fromStdString(name)), QString::fromStdString(name));
  preset_->setToolTip(tr("The model DataParallel wraps; SimpleModel is the source document's Linear(10, 2)"));
  batch_ = new QSpinBox(this);
  batch_->setObjectName(QStringLiteral("batchBox"));
  batch_->setRange(1, 4096);
  batch_->setToolTip(tr("Global batch size: torch.chunk splits it into ceil(N/k)-row chunks"));
  batchNorm_ = new QComboBox(this);
  batchNorm_->addItem(tr("per-device BatchNorm"), false);
  batchNorm_->addItem(tr("whole-batch BN (as DDP + SyncBatchNorm)"), true);
  batchNorm_->setToolTip(tr("Per-device: each replica normalises its own chunk, as nn.DataParallel does. Whole-batch: "
                            "the statistics of the whole batch, what DDP + SyncBatchNorm computes; nn.DataParallel "
                            "itself cannot sync BatchNorm, so this mode is the app's extension."));
  lr_ = new QDoubleSpinBox(this);
  lr_->setDecimals(4);
  lr_->setRange(0.0001, 10.0);
  lr_->setSingleStep(0.01);
  seed_ = new QSpinBox(this);
  seed_->setRange(0, 1000000);
  // The bar fits a 1024-pixel window: the combo boxes share all the room the captions and spin
  // boxes leave (no spacers between the groups, and the stretch at the end only takes what is left
  // once they show their whole names), so at 1024 px the model's name is whole.
  for (QComboBox* box : {devices_, preset_, batchNorm_}) {
    // At most room for the longest name with the arrow and frames.
    int longest = 0;
    for (int i = 0; i < box->count(); ++i) longest = std::max(longest, box->fontMetrics().horizontalAdvance(box->itemText(i)));
    const int whole = std::max(box->sizeHint().width(), longest + 48);
    box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    box->setMinimumContentsLength(16);
    box->setMaximumWidth(std::max(whole, box->sizeHint().width()));
    box->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  }

  row->addWidget(caption(tr("Devices"), this));
  row->addWidget(devices_);
  row->addWidget(caption(tr("Model"), this));
  row->addWidget(preset_);
  row->addWidget(caption(tr("Batch"), this));
  row->addWidget(batch_);
  row->addWidget(batchNorm_);
  row->addWidget(caption(tr("lr"), this));
  row->addWidget(lr_);
  row->addWidget(caption(tr("Seed"), this));
  row->addWidget(seed_);
  row->addStretch(0);  // what is left once the combo boxes show their whole names
  for (QComboBox* box : {devices_, preset_, batchNorm_}) row->setStretchFactor(box, 1);

  debounce_.setSingleShot(true);
  debounce_.setInterval(350);
  connect(&debounce_, &QTimer::timeout, this, &SettingsBar::commit);
  auto now = [this] { if (!updating_) commit(); };
  auto later = [this] { if (!updating_) debounce_.start(); };
  connect(devices_, &QComboBox::currentIndexChanged, this, now);
  connect(preset_, &QComboBox::currentIndexChanged, this, [this] {
    if (updating_) return;
    fitBatchToPreset();
    commit();
  });
  connect(batchNorm_, &QComboBox::currentIndexChanged, this, now);
  connect(batch_, &QSpinBox::valueChanged, this, later);
  connect(lr_, &QDoubleSpinBox::valueChanged, this, later);
  connect(seed_, &QSpinBox::valueChanged, this, later);
  for (QComboBox* box : {devices_, preset_, batchNorm_}) connect(box, &QComboBox::activated, this, &SettingsBar::editingDone);
  // A spin box's Enter commits at once (no pause) and hands the keyboard back; leaving it for
  // another widget keeps the focus where the learner put it.
  for (QAbstractSpinBox* box : std::initializer_list<QAbstractSpinBox*>{batch_, lr_, seed_}) {
    connect(box, &QAbstractSpinBox::editingFinished, this, [this, box] {
      if (debounce_.isActive()) commit();
      if (box->hasFocus()) emit editingDone();
    });
  }
  connect(context, &AppContext::settingsChanged, this, &SettingsBar::showSettings);
  showSettings(context->settings());
}

void SettingsBar::showSettings(const AppSettings& s) {
  updating_ = true;
  int d = devices_->findData(s.devices);
  if (d < 0) {  // a spec from the settings file or the command line that is not in the list
    devices_->addItem(deviceLabel(s.devices), s.devices);
    d = devices_->count() - 1;
  }
  devices_->setCurrentIndex(d);
  const int p = preset_->findData(s.preset);
  if (p >= 0) preset_->setCurrentIndex(p);
  batch_->setValue(s.batchSize);
  batchNorm_->setCurrentIndex(s.syncBatchNorm ? 1 : 0);
  lr_->setValue(s.learningRate);
  seed_->setValue(static_cast<int>(s.seed));
  updating_ = false;
}

AppSettings SettingsBar::current() const {
  AppSettings s = context_->settings();  // what the bar does not show (the Iteration page's mode) is kept
  s.devices = devices_->currentData().toString();
  s.preset = preset_->currentData().toString();
  s.batchSize = batch_->value();
  s.syncBatchNorm = batchNorm_->currentData().toBool();
  s.learningRate = lr_->value();
  s.seed = static_cast<quint64>(seed_->value());
  return s;
}

void SettingsBar::fitBatchToPreset() {
  const AppSettings s = current();
  int devices = 1;
  try {
    devices = dpv::parse_device_spec(s.devices.toStdString()).count;
  } catch (const dpv::Error&) {
    return;  // the engine reports a bad device spec when it runs
  }
  const auto fitted = dpv::course::batch_that_works(s.preset.toStdString(), s.batchSize, devices);
  if (fitted == s.batchSize || fitted > batch_->maximum()) return;
  updating_ = true;
  batch_->setValue(static_cast<int>(fitted));
  updating_ = false;
  emit context_->statusMessage(QString(), tr("Batch set to %1: a batch of %2 on %3 devices leaves a device 1 sample, "
                                  "and BatchNorm cannot train on 1 sample")
                                   .arg(fitted).arg(s.batchSize).arg(devices));
}

void SettingsBar::commit() {
  debounce_.stop();
  context_->setSettings(current());
}

}  // namespace gui
