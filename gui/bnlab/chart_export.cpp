// Export of the BatchNorm lab's charts: PNG images and CSV tables, both written atomically.
#include <QBuffer>
#include <QByteArray>
#include <QImage>
#include <QMap>
#include <QPixmap>
#include <QTextStream>
#include <cmath>
#include <qcustomplot.h>

#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "gui/bnlab/charts.h"

namespace gui {

namespace {

QString write_atomically(const QString& path, const QByteArray& bytes) {
  try {
    dpv::write_file_atomic(path.toStdString(), bytes.toStdString());
    return {};
  } catch (const dpv::Error& e) {
    return QString::fromStdString(e.what());
  }
}

// A CSV field: quoted when it holds a separator, a quote or a line break.
QString csv_field(const QString& text) {
  if (!text.contains(QLatin1Char(',')) && !text.contains(QLatin1Char('"')) && !text.contains(QLatin1Char('\n')))
    return text;
  QString quoted = text;
  quoted.replace(QLatin1String("\""), QLatin1String("\"\""));
  return QLatin1Char('"') + quoted + QLatin1Char('"');
}

}  // namespace

QString BnLabCharts::savePng(Chart chart, const QString& path, int width, int height) const {
  QCustomPlot* p = plots_[chart];
  const int w = width > 0 ? width : std::max(640, p->width());
  const int h = height > 0 ? height : std::max(400, p->height());
  const QImage image = p->toPixmap(w, h).toImage();
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  if (image.isNull() || !image.save(&buffer, "PNG")) return tr("could not render %1 as PNG").arg(chartId(chart));
  return write_atomically(path, bytes);
}

QString BnLabCharts::csvText(Chart chart) const {
  QCustomPlot* p = plots_[chart];
  const int series = p->plottableCount();
  QString text;
  QTextStream out(&text);
  auto number = [](double v) { return std::isfinite(v) ? QString::number(v, 'g', 17) : QString(); };

  if (chart == BatchMean || chart == BatchVar) {
    // One row per device: its chunk's statistic for each model, and the whole-batch values
    // (the same on every row) beside them.
    QStringList header{QStringLiteral("device"), QStringLiteral("rows")};
    for (int i = 0; i < series; ++i) header << csv_field(p->plottable(i)->name());
    out << header.join(QLatin1Char(',')) << "\n";
    for (int d = 0; d < deviceCount_; ++d) {
      const bool active = static_cast<size_t>(d) < latest_.chunks.size();
      out << d << ',' << (active ? QString::number(latest_.chunks[static_cast<size_t>(d)]) : QStringLiteral("0"));
      for (int i = 0; i < series; ++i) {
        QCPPlottableInterface1D* data = p->plottable(i)->interface1D();
        QString cell;
        if (data && qobject_cast<QCPBars*>(p->plottable(i))) {
          for (int k = 0; k < data->dataCount(); ++k)
            if (std::lround(data->dataMainKey(k)) == d) cell = number(data->dataMainValue(k));
        } else if (data && data->dataCount() > 0) {
          cell = number(data->dataMainValue(0));
        }
        out << ',' << cell;
      }
      out << "\n";
    }
    return text;
  }

  // One row per step, one column per series; blank where a series has no point.
  QStringList header{QStringLiteral("step")};
  QMap<double, QVector<QString>> rows;
  for (int i = 0; i < series; ++i) {
    QCPAbstractPlottable* plottable = p->plottable(i);
    header << csv_field(plottable->name());
    QCPPlottableInterface1D* data = plottable->interface1D();
    if (!data) continue;
    for (int k = 0; k < data->dataCount(); ++k) {
      QVector<QString>& row = rows[data->dataMainKey(k)];
      row.resize(series);
      row[i] = number(data->dataMainValue(k));
    }
  }
  out << header.join(QLatin1Char(',')) << "\n";
  for (auto it = rows.constBegin(); it != rows.constEnd(); ++it) {
    QVector<QString> row = it.value();
    row.resize(series);
    out << QString::number(it.key(), 'g', 17);
    for (const QString& v : row) out << ',' << v;
    out << "\n";
  }
  return text;
}

QString BnLabCharts::saveCsv(Chart chart, const QString& path) const {
  return write_atomically(path, csvText(chart).toUtf8());
}

}  // namespace gui
