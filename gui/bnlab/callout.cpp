#include "gui/bnlab/callout.h"

#include <QCoreApplication>
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/data_parallel.h"

namespace gui {

namespace {

QString tr_(const char* text) { return QCoreApplication::translate("BnLabCallout", text); }

QString join_sizes(const std::vector<int64_t>& sizes) {
  QStringList parts;
  for (int64_t s : sizes) parts << QString::number(s);
  return parts.join(QStringLiteral(", "));
}

// Marks engine text so the HTML form can set it apart; the plain form drops the marks.
const QString kQuoteOpen = QStringLiteral("\x01");
const QString kQuoteClose = QStringLiteral("\x02");

}  // namespace

static QStringList paragraphs_with_marks(const BnLabCalloutInput& in) {
  QStringList out;
  if (!in.setupError.isEmpty()) {
    out << tr_("The devices could not be set up. The engine says: ") + kQuoteOpen + in.setupError + kQuoteClose;
    return out;
  }
  const int devices = std::max(1, in.devices);
  const std::vector<int64_t> chunks = in.batchSize > 0 ? dpv::chunk_sizes(in.batchSize, devices) : std::vector<int64_t>{};
  std::vector<int64_t> used;
  for (int64_t c : chunks)
    if (c > 0) used.push_back(c);

  if (in.batchSize > 0 && static_cast<int>(used.size()) < devices) {
    const int firstIdle = static_cast<int>(used.size());
    const QString idle = firstIdle == devices - 1 ? tr_("GPU %1 gets").arg(firstIdle)
                                                  : tr_("GPU %1 to GPU %2 get").arg(firstIdle).arg(devices - 1);
    out << tr_("Idle devices: torch.chunk splits a batch of %1 into pieces of ceil(%1/%2) = %3 rows, "
               "which gives %4 chunk(s) (%5) for %2 devices. %6 no rows and no replica in this step.")
               .arg(in.batchSize)
               .arg(devices)
               .arg((in.batchSize + devices - 1) / devices)
               .arg(used.size())
               .arg(join_sizes(used))
               .arg(idle);
  }
  int oneSample = -1;
  for (size_t d = 0; d < used.size(); ++d)
    if (used[d] == 1) oneSample = static_cast<int>(d);
  if (oneSample >= 0) {
    out << tr_("One-sample chunk: with a batch of %1 on %2 device(s) the chunks are %3, so GPU %4 gets "
               "a single sample. BatchNorm in training mode needs more than one value per channel, so "
               "per-device BatchNorm fails in that replica; SyncBatchNorm normalises with the whole "
               "batch and accepts it. Choose a batch size whose chunks all hold two or more rows.")
               .arg(in.batchSize)
               .arg(devices)
               .arg(join_sizes(used))
               .arg(oneSample);
  }
  if (!in.failure.isEmpty()) {
    const QString when = in.othersTrain
                             ? tr_("The %1 model stopped at step %2; the other models train on. The engine refused it:")
                                   .arg(in.failureModel)
                                   .arg(in.failureStep)
                             : tr_("Training stopped. The engine refused a step of the %1 model:").arg(in.failureModel);
    out << when + QLatin1Char(' ') + kQuoteOpen + in.failure + kQuoteClose;
  } else if (!in.probeError.isEmpty()) {
    out << tr_("The engine refuses the first step of the %1 model; Start trains the others while that one stops:")
                   .arg(in.probeModel) +
               QLatin1Char(' ') + kQuoteOpen + in.probeError + kQuoteClose;
  }
  if (in.ddpPadding > 0 && !in.ddpShards.isEmpty()) {
    QStringList shards;
    qint64 padded = 0;
    for (qint64 n : in.ddpShards) {
      shards << QString::number(n);
      padded += n;
    }
    const auto distance = [](double v) { return std::isfinite(v) ? QString::number(v, 'g', 2) : tr_("none (stopped)"); };
    out << tr_("DDP pads the batch: DistributedSampler gives each of the %1 ranks an equal shard (%2), so the batch "
               "of %3 becomes %4 rows, %5 sample(s) repeated. Both DDP models count those twice in their statistics, "
               "losses and gradients, so DDP's SyncBatchNorm is not the one-device result here: its distance from the "
               "reference is %6 after this step (DataParallel's SyncBatchNorm, which pads nothing: %7).")
               .arg(in.ddpShards.size())
               .arg(shards.join(QStringLiteral(", ")))
               .arg(in.ddpBatchRows)
               .arg(padded)
               .arg(in.ddpPadding)
               .arg(distance(in.ddpSyncDistance), distance(in.dpSyncDistance));
  }
  if (in.steps >= kBnLabResultSteps) {
    const auto loss = [](double v) { return std::isfinite(v) ? QString::number(v, 'f', 2) : tr_("none (stopped)"); };
    const QString setup = tr_("Result after %1 steps (%2, batch %3 on %4 devices): ")
                              .arg(in.steps)
                              .arg(in.classSorted ? tr_("class-sorted batches") : tr_("mixed batches"))
                              .arg(in.batchSize)
                              .arg(devices);
    QString result = std::isfinite(in.lossPerDevice)
                         ? setup + tr_("the loss of per-device BatchNorm is %1 (it started at %2), of SyncBatchNorm %3, "
                                       "of the single-device reference %4.")
                                       .arg(loss(in.lossPerDevice), loss(in.firstLossPerDevice), loss(in.lossSync),
                                            loss(in.lossReference))
                         : setup + tr_("per-device BatchNorm has stopped; the loss of SyncBatchNorm is %1, of the "
                                       "single-device reference %2.")
                                       .arg(loss(in.lossSync), loss(in.lossReference));
    if (std::isfinite(in.lossPerDevice) && std::isfinite(in.lossSync)) {
      if (in.lossPerDevice > in.lossSync + 0.1) {
        result += QLatin1Char(' ') +
                  tr_("Each device normalises its own chunk, which holds few classes, so per-device BatchNorm "
                      "takes away what tells the classes apart; SyncBatchNorm normalises with the whole batch, "
                      "as the single device does, and learns.");
      } else {
        result += QLatin1Char(' ') + tr_("Here every chunk looks like the whole batch, so per-device statistics "
                                         "are close to the whole batch's and both models learn alike.");
      }
    }
    out << result;
  }
  return out;
}

QStringList bnlab_callout_paragraphs(const BnLabCalloutInput& input) {
  QStringList out = paragraphs_with_marks(input);
  for (QString& p : out) p.remove(kQuoteOpen).remove(kQuoteClose);
  return out;
}

QString bnlab_callout_html(const BnLabCalloutInput& input) {
  QStringList html;
  for (const QString& p : paragraphs_with_marks(input)) {
    QString escaped = p.toHtmlEscaped();
    escaped.replace(kQuoteOpen, QStringLiteral("<br><code style=\"white-space: pre-wrap\">"));
    escaped.replace(kQuoteClose, QStringLiteral("</code>"));
    html << QStringLiteral("<p>") + escaped + QStringLiteral("</p>");
  }
  return html.join(QString());
}

}  // namespace gui
