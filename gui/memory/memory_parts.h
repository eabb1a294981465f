#pragma once
// The parts of a rank's memory the Memory page draws and tabulates, in stacking order (what stays
// between iterations at the bottom, what one iteration makes on top): each a field of the engine's
// dpv::MemoryBreakdown, its legend name and its colour. The colours are the Iteration page's
// memory bars' (SceneColors::memoryFor), so a kind looks the same on every page.
#include <QColor>
#include <QList>
#include <QString>
#include <memory>
#include <optional>

#include "course/zero_memory.h"
#include "engine/observer.h"

namespace gui {

// One finished comparison, shared (never copied) between the worker's thread, the page and its charts.
using MemoryResult = std::shared_ptr<const dpv::course::MemoryComparison>;

struct BreakdownPart {
  std::optional<dpv::MemoryKind> kind;    // none: `other` (allocations no listed tensor accounts for)
  QString name;                           // "parameters", "optimizer state", ...
  int64_t dpv::MemoryBreakdown::*bytes;   // the engine's field
};

// Every part of dpv::MemoryBreakdown, once.
const QList<BreakdownPart>& breakdownParts();
// The part's colour in `theme` ("light", "dark"): memoryFor(kind), `other` a faded text colour.
QColor breakdownPartColour(const BreakdownPart& part, const QString& theme);
// "12,345 B": exact, so the table shows the engine's number as it is.
QString exactBytes(int64_t bytes);

}  // namespace gui
