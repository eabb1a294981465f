#pragma once
// What the Iteration scene shows after a stage, derived from the engine's snapshot alone (a pure
// function, so tests can compare the scene against the engine's StageEvents one to one).
#include <QList>
#include <QString>

#include "gui/runtime/engine_types.h"

namespace gui {

// One chip: the tensors of one part of a device's memory ("params ×6 · 1.2 KB"), drawn in that
// part's colour, so the chips and the memory bar below them tell the same story.
struct ChipView {
  dpv::TensorRole role = dpv::TensorRole::Input;  // the part's role: Input, Param, Activation, Output, Grad, Optimizer
  dpv::MemoryKind kind = dpv::MemoryKind::Batch;
  QString text;    // the label drawn on the chip
  QList<dpv::TensorInfo> tensors;  // what the inspector shows when the chip is clicked
  bool synthesized = false;        // made from chunk sizes (an event without a snapshot listed no tensor)
  int device = -1;                 // the device it is on (-1: a chip in flight between devices)
  // Shorter ways to say `text` where room is short, longest first: it without its trailing
  // " · " parts ("samples 3, 4, 5 · [3, 10]" -> "samples 3, 4, 5"); the hover card has it whole.
  QStringList shorterTexts;
};
// The chip group of a part of memory, and its role.
dpv::TensorRole chipRoleFor(dpv::MemoryKind kind);
// "samples 0, 1, 2" or "samples 3–9": which rows of the batch a chunk holds.
QString sampleRowsText(int64_t first, int64_t count);
// The same rows' numbers alone: "0, 1, 2", "3–9", "4" ("" for none).
QString sampleNumbersText(int64_t first, int64_t count);
// The hover card of a chip: each tensor's name, shape, bytes, values and why it is there (HTML).
QString chipHoverCard(const ChipView& chip);

struct DeviceView {
  int device = 0;
  QString title;     // "GPU 1"
  QString subtitle;  // "simulated on CPU · output device"
  // Shorter ways to say the subtitle where room is short, longest first ("output device", "on CPU").
  QStringList shorterSubtitles;
  bool hasReplica = false;
  bool replicaDiscarded = false;  // its replica was freed after the backward
  bool idle = false;       // after Scatter: no chunk for this device
  qint64 chunkRows = 0;
  qint64 memoryBytes = 0;
  qint64 memoryPeak = 0;
  dpv::MemoryBreakdown memory;  // memoryBytes by part, from the engine
  QList<ChipView> chips;   // in slot order
  QString note;            // one short line under the chips (BatchNorm stats, "gradients summed here")
};

struct SceneState {
  bool started = false;    // false: before the first stage (the batch is still on the host)
  int stageIndex = -1;
  dpv::StageKind kind = dpv::StageKind::Scatter;
  int layer = -1;          // Forward/Backward layer
  QList<DeviceView> devices;
  // The numbers card beside the host (empty title: none for this stage): which samples went
  // where (Scatter), g0 + g1 + ... = g next to one device's gradient (Reduce), the weight before
  // and after (Step). Every number is the engine's.
  QString cardTitle;
  QStringList cardTitleShorter;  // shorter ways to say the title, longest first
  QStringList cardLines;
};

// Slot of a role in a device box, top down: batch (input, target), params (and buffers),
// activations, output (and loss), grads, optimizer state.
int chipSlot(dpv::TensorRole role);
constexpr int kChipSlots = 6;

// The name the code panel's program gives a parameter or buffer the engine names as nn.Sequential
// does: "linear.weight" for the sample preset's "0.weight" (course::program_parameter_name).
QString programParameterName(const IterationInfo& info, const std::string& engineName);

// The scene's content before any stage (event == nullptr: what info.devicesBefore lists) or after `event`.
SceneState sceneStateFor(const IterationInfo& info, const dpv::StageEvent* event);

}  // namespace gui
