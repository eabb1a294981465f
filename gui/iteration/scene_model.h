#pragma once
// What the Iteration scene shows after a stage, derived from the engine's snapshot alone (a pure
// function, so tests can compare the scene against the engine's StageEvents one to one).
#include <QList>
#include <QString>

#include "gui/runtime/engine_types.h"

namespace gui {

// One chip: a group of tensors of one role on one device ("parameters: 6 tensors, 1.2 KB").
struct ChipView {
  dpv::TensorRole role = dpv::TensorRole::Input;  // buffers are shown as Param
  QString text;    // the label drawn on the chip
  QList<dpv::TensorInfo> tensors;  // what the inspector shows when the chip is clicked
  bool synthesized = false;        // made from chunk_rows/has_replica (the snapshot listed no tensor)
};

struct DeviceView {
  int device = 0;
  QString title;     // "GPU 1"
  QString subtitle;  // "simulated on CPU · output device"
  bool hasReplica = false;
  bool idle = false;       // after Scatter: no chunk for this device
  qint64 chunkRows = 0;
  qint64 memoryBytes = 0;
  qint64 memoryPeak = 0;
  QList<ChipView> chips;   // in slot order
  QString note;            // one short line under the chips (BatchNorm stats, "gradients summed here")
};

struct SceneState {
  bool started = false;    // false: before the first stage (the batch is still on the host)
  int stageIndex = -1;
  dpv::StageKind kind = dpv::StageKind::Scatter;
  int layer = -1;          // Forward/Backward layer
  QList<DeviceView> devices;
};

// Slot of a role in a device box, top down: input, target, param (and buffers), activation,
// output, loss, grad.
int chipSlot(dpv::TensorRole role);
constexpr int kChipSlots = 7;

// The scene's content before any stage (event == nullptr) or after `event`.
SceneState sceneStateFor(const IterationInfo& info, const dpv::StageEvent* event);
// "GPU 1 (simulated on CPU)" -> {"GPU 1", "simulated on CPU"}.
QPair<QString, QString> splitDeviceLabel(const QString& label);

}  // namespace gui
