#include "gui/bnlab/callout.h"

#include <QCoreApplication>
#include <algorithm>
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
  const QString& errorModel = !in.failure.isEmpty() ? in.failureModel : in.probeModel;
  const QString& error = !in.failure.isEmpty() ? in.failure : in.probeError;
  if (!error.isEmpty()) {
    const QString when = !in.failure.isEmpty() ? tr_("Training stopped. The engine refused a step of the %1 model:")
                                               : tr_("The engine refuses the first step of the %1 model:");
    out << when.arg(errorModel) + QLatin1Char(' ') + kQuoteOpen + error + kQuoteClose;
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
