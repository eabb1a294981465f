// The Memory page's words and table, written from the comparison it shows: the run's caption, the
// peak and persistent table, the formula beside the measured figures and the differences. Every
// number is a field of course::MemoryComparison; nothing here recomputes one.
#include <QComboBox>
#include <QHeaderView>
#include <algorithm>
#include <QLabel>
#include <QTableWidget>

#include "course/run_caption.h"
#include "engine/error.h"
#include "gui/memory/page.h"
#include "gui/runtime/engine_types.h"

namespace gui {

namespace {

using dpv::course::MemoryComparison;
using dpv::course::StrategyMemory;

// How the standard accounting writes each strategy's bytes per rank (p, g, K bytes per parameter).
QString formulaFor(dpv::StrategyKind kind) {
  switch (kind) {
    case dpv::StrategyKind::Zero1: return QStringLiteral("(p + g + K/W)·Ψ");
    case dpv::StrategyKind::Zero2: return QStringLiteral("(p + (g + K)/W)·Ψ");
    case dpv::StrategyKind::Zero3: return QStringLiteral("(p + g + K)·Ψ/W");
    default: return QStringLiteral("(p + g + K)·Ψ");
  }
}

QString name(dpv::StrategyKind kind) { return QString::fromLatin1(dpv::strategy_short_name(kind)); }

QTableWidgetItem* bytesItem(int64_t bytes) {
  auto* item = new QTableWidgetItem(exactBytes(bytes));
  item->setData(Qt::UserRole, static_cast<qlonglong>(bytes));
  item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return item;
}

QString number(double value) { return QString::number(value, 'g', 12); }

}  // namespace

QString MemoryPage::caption(const MemoryComparison& c) const {
  std::string optimizer = dpv::optimizer_name(c.run.optimizer.kind);
  if (c.run.optimizer.kind == dpv::OptimizerKind::Sgd && c.run.optimizer.momentum > 0) optimizer += " with momentum";
  return tr("Data: %1 · %2 · Ψ = %3 parameters over W = %4 ranks")
      .arg(QString::fromStdString(dpv::course::run_caption(c.run, 0, "DDP, ZeRO-1, ZeRO-2 and ZeRO-3")).toHtmlEscaped(),
           QString::fromStdString(optimizer))
      .arg(c.parameters)
      .arg(c.world);
}

void MemoryPage::fillTable() {
  const MemoryComparison& c = *result_;
  const auto rank = static_cast<size_t>(std::max(0, rank_->currentIndex()));
  QStringList headers{tr("rank %1").arg(rank)};
  for (const StrategyMemory& s : c.strategies) headers << tr("%1\npeak").arg(name(s.strategy)) << tr("%1\npersistent").arg(name(s.strategy));
  table_->setColumnCount(static_cast<int>(headers.size()));
  table_->setHorizontalHeaderLabels(headers);
  const QList<BreakdownPart>& parts = breakdownParts();
  table_->setRowCount(static_cast<int>(parts.size()) + 1);
  for (int row = 0; row <= static_cast<int>(parts.size()); ++row) {
    const bool total = row == static_cast<int>(parts.size());
    table_->setItem(row, 0, new QTableWidgetItem(total ? tr("total") : parts[row].name));
    for (size_t s = 0; s < c.strategies.size(); ++s) {
      const StrategyMemory& m = c.strategies[s];
      const int column = 1 + 2 * static_cast<int>(s);
      if (rank >= m.at_peak.size() || rank >= m.persistent.size()) continue;
      // The peak column is the rank's bytes at its largest total, by kind: its total is peak_total.
      table_->setItem(row, column, bytesItem(total ? m.peak_total[rank] : m.at_peak[rank].*parts[row].bytes));
      table_->setItem(row, column + 1, bytesItem(total ? m.persistent[rank].total() : m.persistent[rank].*parts[row].bytes));
    }
  }
}

QString MemoryPage::stageText() const { return stage_->text(); }

void MemoryPage::showStage(int strategy, int sample) {
  if (!result_ || strategy < 0 || static_cast<size_t>(strategy) >= result_->strategies.size()) return;
  const StrategyMemory& m = result_->strategies[static_cast<size_t>(strategy)];
  if (sample < 0 || static_cast<size_t>(sample) >= m.samples.size() || m.samples[static_cast<size_t>(sample)].ranks.empty()) return;
  const dpv::course::MemorySample& s = m.samples[static_cast<size_t>(sample)];
  QString html = tr("<b>%1, after “%2”</b>: rank 0 holds %3.")
                     .arg(name(m.strategy), QString::fromStdString(s.stage.title).toHtmlEscaped(), exactBytes(s.ranks.front().total()));
  try {
    QStringList lines;
    for (const dpv::course::MemoryDifference& d : dpv::course::explain_stage(*result_, m.strategy, sample))
      lines << QStringLiteral("%1 %2%3: %4").arg(d.other ? tr("other") : QString::fromLatin1(dpv::memory_kind_name(d.kind)),
                                                 d.bytes > 0 ? QStringLiteral("+") : QString(), exactBytes(d.bytes),
                                                 QString::fromStdString(d.why).toHtmlEscaped());
    html += lines.isEmpty() ? tr(" The formula's figure, exactly.") : tr(" Beside the formula: ") + lines.join(QStringLiteral("; "));
  } catch (const dpv::Error& e) {
    html += QLatin1Char(' ') + QString::fromStdString(e.full()).toHtmlEscaped();
  }
  stage_->setText(html);
}

QString MemoryPage::formulaHtml(const MemoryComparison& c) const {
  const dpv::course::MemoryFormula& f = c.formula;
  QString html = tr("<b>The formula</b> for Ψ = %1 parameters over W = %2 ranks, in float32: p = %3 bytes of parameter, "
                    "g = %4 of gradient and K = %5 of optimizer state per parameter.")
                     .arg(f.parameters)
                     .arg(f.world)
                     .arg(number(f.param_bytes), number(f.grad_bytes), number(f.optimizer_bytes));
  html += QStringLiteral("<table cellspacing=\"0\" cellpadding=\"3\"><tr><th align=\"left\">%1</th><th align=\"left\">%2</th>"
                         "<th align=\"right\">%3</th><th align=\"right\">%4</th><th align=\"right\">%5</th></tr>")
              .arg(tr("strategy"), tr("formula"), tr("formula bytes"), tr("measured between iterations"), tr("mixed precision, K = %1").arg(number(f.mixed_optimizer_bytes)));
  for (size_t s = 0; s < c.strategies.size(); ++s) {
    const StrategyMemory& m = c.strategies[s];
    const QString measured = m.persistent.empty() ? QStringLiteral("–") : exactBytes(m.persistent.front().total());
    html += QStringLiteral("<tr><td>%1</td><td>%2</td><td align=\"right\">%3</td><td align=\"right\">%4</td><td align=\"right\">%5</td></tr>")
                .arg(name(m.strategy), formulaFor(m.strategy), exactBytes(static_cast<int64_t>(f.for_strategy(m.strategy))), measured,
                     formatBytes(f.mixed_for_strategy(m.strategy)));
  }
  html += QStringLiteral("</table>");
  return html;
}

// One list between iterations and one at the peak: each line the engine's sentence, under the
// strategy and the part it is counted in.
QString MemoryPage::differencesHtml(const MemoryComparison& c) const {
  if (c.differences.empty()) return tr("<b>Measured and formula agree</b> for every strategy: the run kept nothing the formula leaves out.");
  QString html;
  for (const bool atPeak : {false, true}) {
    QString items;
    for (const dpv::course::MemoryDifference& d : c.differences) {
      if (d.at_peak != atPeak) continue;
      const QString part = d.other ? tr("other") : QString::fromLatin1(dpv::memory_kind_name(d.kind));
      items += QStringLiteral("<li><b>%1</b>, %2, %3%4%5: %6</li>")
                   .arg(name(d.strategy), part.toHtmlEscaped(), d.bytes > 0 ? QStringLiteral("+") : QString(), exactBytes(d.bytes),
                        d.explained ? QString() : tr(" (not explained)"), QString::fromStdString(d.why).toHtmlEscaped());
    }
    if (items.isEmpty()) continue;
    html += (atPeak ? tr("<b>At each strategy's peak</b>, measured minus formula on rank 0:")
                    : tr("<b>Between iterations</b>, measured minus formula on rank 0:")) +
            QStringLiteral("<ul>") + items + QStringLiteral("</ul>");
  }
  return html;
}

}  // namespace gui
