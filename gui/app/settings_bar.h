#pragma once
// The settings bar above the pages: devices, model preset, batch size, BatchNorm mode, learning
// rate, seed. Edits go to AppContext::setSettings (spin boxes after a short pause, so typing "128"
// does not start three engines).
#include <QFrame>
#include <QTimer>

#include "gui/common/context.h"

class QComboBox;
class QDoubleSpinBox;
class QSpinBox;

namespace gui {

// Device specs offered: cpu:1..cpu:8, and the GPUs when the engine has CUDA.
QStringList deviceChoices();

class SettingsBar : public QFrame {
  Q_OBJECT
 public:
  SettingsBar(AppContext* context, QWidget* parent = nullptr);
  void showSettings(const AppSettings& settings);  // without emitting
  AppSettings current() const;

 signals:
  // The learner finished editing a setting (picked an item, pressed Enter or left a spin box):
  // the main window gives the keyboard back to the page, so Space and the arrows step again.
  void editingDone();

 private:
  void commit();
  // When the learner picks a preset with BatchNorm, raises the batch so every device gets at least
  // 2 samples (course::batch_that_works), so each preset works with the settings it starts with.
  void fitBatchToPreset();
  AppContext* context_;
  QComboBox* devices_;
  QComboBox* preset_;
  QSpinBox* batch_;
  QComboBox* batchNorm_;
  QDoubleSpinBox* lr_;
  QSpinBox* seed_;
  QTimer debounce_;
  bool updating_ = false;
};

}  // namespace gui
