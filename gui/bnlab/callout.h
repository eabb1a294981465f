#pragma once
// The BatchNorm lab's callout: what the current batch size and device count do to the chunks
// (a one-sample chunk, idle devices), the engine's own error text when it refused a step, and the
// result once the models have trained a while (the engine's losses).
#include <QString>
#include <QStringList>
#include <cstdint>

namespace gui {

struct BnLabCalloutInput {
  int64_t batchSize = 0;
  int devices = 1;
  QString probeModel, probeError;      // the engine's error on the first batch, before training
  QString failureModel, failure;       // the engine's error during training
  qint64 failureStep = 0;              // the step it came at
  bool othersTrain = false;            // only that model stopped; the others train on
  QString setupError;                  // the devices could not be built
  // The result so far: the losses of the last steps (mean of up to 20), from the engine; shown
  // from kBnLabResultSteps steps on. NaN for a model that stopped.
  qint64 steps = 0;
  bool classSorted = true;
  double firstLossPerDevice = 0, lossPerDevice = 0, lossSync = 0, lossReference = 0;
  // DDP's DistributedSampler padding in the latest step (course BnLabStep::ddpPadding), the shards
  // it made, and both synchronised models' distance from the reference after that step.
  qint64 ddpPadding = 0;
  qint64 ddpBatchRows = 0;  // the global batch before the padding
  QList<qint64> ddpShards;
  double ddpSyncDistance = 0, dpSyncDistance = 0;
};
// Steps after which the callout states the result.
inline constexpr qint64 kBnLabResultSteps = 50;

// Plain-text paragraphs (empty when there is nothing to warn about). The engine's messages are
// quoted verbatim.
QStringList bnlab_callout_paragraphs(const BnLabCalloutInput& input);
// The same as rich text for a QLabel (engine messages in a monospace span, HTML-escaped).
QString bnlab_callout_html(const BnLabCalloutInput& input);

}  // namespace gui
