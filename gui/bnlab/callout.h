#pragma once
// The BatchNorm lab's callout: what the current batch size and device count do to the chunks
// (a one-sample chunk, idle devices) and the engine's own error text when it refused a step.
#include <QString>
#include <QStringList>
#include <cstdint>

namespace gui {

struct BnLabCalloutInput {
  int64_t batchSize = 0;
  int devices = 1;
  QString probeModel, probeError;      // the engine's error on the first batch, before training
  QString failureModel, failure;       // the engine's error during training
  QString setupError;                  // the devices could not be built
};

// Plain-text paragraphs (empty when there is nothing to warn about). The engine's messages are
// quoted verbatim.
QStringList bnlab_callout_paragraphs(const BnLabCalloutInput& input);
// The same as rich text for a QLabel (engine messages in a monospace span, HTML-escaped).
QString bnlab_callout_html(const BnLabCalloutInput& input);

}  // namespace gui
