#include "gui/common/scene_model.h"

#include <QObject>
#include <algorithm>
#include <cmath>
#include <map>

#include "course/sample_program.h"

namespace gui {

namespace {

using dpv::MemoryKind;
using dpv::TensorRole;

const QString kChipPartSeparator = QStringLiteral(" · ");

size_t totalBytes(const QList<dpv::TensorInfo>& ts) {
  size_t b = 0;
  for (const auto& t : ts) {
    if (!t.view) b += t.bytes;
  }
  return b;
}

QString bytesText(const QList<dpv::TensorInfo>& ts) { return formatBytes(static_cast<double>(totalBytes(ts))); }

const dpv::TensorInfo* findNamed(const QList<dpv::TensorInfo>& ts, const char* name) {
  for (const auto& t : ts) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// A chip's label in parts, most important first: the chip shows them joined by " · " and, where
// room is short, drops them from the end ("samples 3, 4, 5 · [3, 10]", "samples 3, 4, 5").
QStringList chipTextParts(MemoryKind kind, const QList<dpv::TensorInfo>& ts) {
  switch (kind) {
    case MemoryKind::Batch: {
      const dpv::TensorInfo* chunk = nullptr;
      for (const auto& t : ts) {
        if (t.first_row >= 0 && t.name != "inputs") chunk = &t;
      }
      const dpv::TensorInfo* inputs = findNamed(ts, "inputs");
      if (inputs && chunk) {
        return {QObject::tr("%1 + batch").arg(sampleRowsText(chunk->first_row, chunk->shape.empty() ? 0 : chunk->shape[0]))};
      }
      if (inputs) return {QObject::tr("batch %1 + labels").arg(formatShape(inputs->shape))};
      if (chunk) return {sampleRowsText(chunk->first_row, chunk->shape.empty() ? 0 : chunk->shape[0]), formatShape(chunk->shape)};
      break;
    }
    case MemoryKind::Parameters: {
      // Parameters and buffers (BatchNorm's running statistics) share this part of memory; only the
      // former are parameters, so they are counted apart.
      const auto buffers = std::count_if(ts.begin(), ts.end(), [](const dpv::TensorInfo& t) { return t.role == TensorRole::Buffer; });
      const QString params = QObject::tr("params ×%1").arg(ts.size() - buffers);
      if (buffers == 0) return {params, bytesText(ts)};
      // One part, so a short chip drops the bytes but never the buffers.
      return {params + kChipPartSeparator + QObject::tr("buffers ×%1").arg(buffers), bytesText(ts)};
    }
    case MemoryKind::Gradients: return {QObject::tr("grads ×%1").arg(ts.size()), bytesText(ts)};
    case MemoryKind::Optimizer: return {QObject::tr("momentum ×%1").arg(ts.size()), bytesText(ts)};
    case MemoryKind::Buckets: return {QObject::tr("buckets ×%1").arg(ts.size()), bytesText(ts)};
    case MemoryKind::Gathered: return {QObject::tr("gathered params"), bytesText(ts)};
    case MemoryKind::Activations: {
      // The newest activation (or its gradient) names the chip; what backward keeps is counted.
      const dpv::TensorInfo* current = &ts.back();
      for (const auto& t : ts) {
        if (t.name.rfind("layer ", 0) != 0 && t.name.rfind("input of layer", 0) != 0) current = &t;
      }
      const QString name = QStringLiteral("%1 %2").arg(QString::fromStdString(current->name), formatShape(current->shape));
      if (ts.size() == 1) return {name};
      return {name, QObject::tr("%1 kept").arg(ts.size()), bytesText(ts)};
    }
    case MemoryKind::Output: {
      const dpv::TensorInfo* out = findNamed(ts, "output");
      const dpv::TensorInfo* loss = findNamed(ts, "loss");
      const dpv::TensorInfo* grad = findNamed(ts, "grad of output");
      QString text = out ? QObject::tr("output %1").arg(formatShape(out->shape)) : QString();
      if (grad) text += (text.isEmpty() ? QString() : QStringLiteral(" + ")) + QObject::tr("its grad");
      QStringList parts;
      if (!text.isEmpty()) parts << text;
      if (loss && !loss->head.empty()) parts << QObject::tr("loss %1").arg(loss->head.front(), 0, 'g', 4);
      if (!parts.isEmpty()) return parts;
      break;
    }
  }
  const dpv::TensorInfo& last = ts.back();
  return {QStringLiteral("%1 %2").arg(QString::fromStdString(last.name), formatShape(last.shape))};
}

ChipView chipOf(MemoryKind kind, const QList<dpv::TensorInfo>& ts, int device) {
  const QStringList parts = chipTextParts(kind, ts);
  ChipView chip{chipRoleFor(kind), kind, parts.join(kChipPartSeparator), ts, false, device};
  for (qsizetype n = parts.size() - 1; n >= 1; --n) chip.shorterTexts << parts.first(n).join(kChipPartSeparator);
  return chip;
}

QString valuesText(const dpv::TensorInfo& t, int max) {
  QStringList values;
  for (size_t i = 0; i < t.head.size() && static_cast<int>(i) < max; ++i) values << QString::number(t.head[i], 'g', 4);
  int64_t numel = 1;
  for (int64_t d : t.shape) numel *= d;
  if (numel > static_cast<int64_t>(values.size())) values << QStringLiteral("…");
  return QStringLiteral("[") + values.join(QStringLiteral(", ")) + QStringLiteral("]");
}

QString num(double v) { return QString::number(v, 'g', 4); }

QString fixed(double v, int decimals) { return QString::number(v, 'f', decimals); }

// The fewest decimals (four significant digits of the largest value at least, at most four more)
// at which the terms, each rounded as shown, add up to the sum rounded as shown: 0.1500 + 0.1500 +
// 0.1500 = 0.4501 would read as an error, so a digit more is shown until the line adds up.
int decimalsThatAddUp(const std::vector<double>& terms, double sum) {
  double largest = std::abs(sum);
  for (double t : terms) largest = std::max(largest, std::abs(t));
  const int first = largest > 0 ? std::max(0, 3 - static_cast<int>(std::floor(std::log10(largest)))) : 4;
  for (int d = first; d < first + 4; ++d) {
    const double unit = std::pow(10.0, d);
    long long shownTerms = 0;
    for (double t : terms) shownTerms += std::llround(t * unit);
    if (shownTerms == std::llround(sum * unit)) return d;
  }
  return first + 4;
}


QString devicesText(int first, int last) {
  return first == last ? QObject::tr("GPU %1").arg(first) : QObject::tr("GPUs %1–%2").arg(first).arg(last);
}

void fillCard(SceneState& state, const dpv::StageEvent& e, const IterationInfo& info, int devices) {
  const auto& chunks = e.chunk_sizes;
  if (e.stage.kind == dpv::StageKind::Scatter && !chunks.empty()) {
    state.cardTitle = QObject::tr("Which samples went where (torch.chunk)");
    state.cardTitleShorter = {QObject::tr("Which samples went where")};  // the numbers stay whole
    QStringList parts;
    int64_t first = 0;
    for (size_t j = 0; j < chunks.size(); ++j) {
      parts << QObject::tr("GPU %1: %2").arg(j).arg(sampleNumbersText(first, chunks[j]));
      first += chunks[j];
    }
    // The card has three lines: the devices spread over them (two if an idle line follows), so
    // every line stays short enough to be read whole in a small window.
    const int used = static_cast<int>(chunks.size());
    const int lines = used < devices ? 2 : 3;
    const int perLine = std::max<int>(1, static_cast<int>((parts.size() + lines - 1) / lines));
    for (int i = 0; i < parts.size(); i += perLine) state.cardLines << parts.mid(i, perLine).join(QStringLiteral("  ·  "));
    if (used < devices) state.cardLines << QObject::tr("%1: no chunk, idle").arg(devicesText(used, devices - 1));
    return;
  }
  if (!e.weight || e.weight->replica_grads.empty()) return;
  const dpv::WeightElement& w = *e.weight;
  const QString element = QStringLiteral("%1[%2]").arg(programParameterName(info, w.param)).arg(w.index);
  if (e.stage.kind == dpv::StageKind::ReduceGrads) {
    const int r = static_cast<int>(w.replica_grads.size());
    const int decimals = decimalsThatAddUp(w.replica_grads, w.grad);
    QStringList symbols, values;
    for (int j = 0; j < r; ++j) {
      symbols << QStringLiteral("g%1").arg(j);
      values << fixed(w.replica_grads[static_cast<size_t>(j)], decimals);
    }
    state.cardTitle = QObject::tr("grad of %1: %2 = g").arg(element, symbols.join(QStringLiteral(" + ")));
    // Many replicas: the title says the sum's shape; the lines below keep every term.
    state.cardTitleShorter = {QObject::tr("grad of %1: g0 + … + g%2 = g").arg(element).arg(r - 1),
                              QObject::tr("grad of %1 = sum of %2 replicas").arg(element).arg(r)};
    if (r <= 4) {
      state.cardLines << values.join(QStringLiteral(" + ")) + QStringLiteral(" = ") + fixed(w.grad, decimals);
    } else {
      state.cardLines << values.mid(0, 4).join(QStringLiteral(" + ")) + QStringLiteral(" +");
      state.cardLines << values.mid(4).join(QStringLiteral(" + ")) + QStringLiteral(" = ") + fixed(w.grad, decimals);
    }
    if (w.single_device_grad && w.difference) {
      const QString oneDevice = QObject::tr("one device, whole batch: %1 · difference %2")
                                    .arg(fixed(*w.single_device_grad, decimals), QString::number(*w.difference, 'g', 2));
      // The card has three lines: the reason gets its own when the sum took one. Whether BatchNorm
      // is the reason is the run's fact, the one the Reduce lesson states.
      const bool perChunkBatchNorm = r > 1 && info.lessonFacts.bn_breaks_sum;
      if (perChunkBatchNorm && state.cardLines.size() == 1) {
        state.cardLines << oneDevice
                        << QObject::tr("why: each replica's BatchNorm used its own chunk's mean and variance");
      } else if (perChunkBatchNorm) {
        state.cardLines << QObject::tr("%1 · BatchNorm used each chunk's own statistics").arg(oneDevice);
      } else {
        state.cardLines << oneDevice;
      }
    } else {
      state.cardLines << QObject::tr("one device, whole batch: could not run");
    }
    return;
  }
  if (e.stage.kind == dpv::StageKind::Step && w.weight_before && w.weight_after) {
    state.cardTitle = QObject::tr("%1 in optimizer.step()").arg(element);
    state.cardLines << QObject::tr("before %1  →  after %2").arg(num(*w.weight_before), num(*w.weight_after));
    state.cardLines << QObject::tr("SGD: w ← w − lr · g, with g = %1 (the summed gradient)").arg(num(w.grad));
  }
}

}  // namespace

QString programParameterName(const IterationInfo& info, const std::string& engineName) {
  return QString::fromStdString(dpv::course::program_parameter_name(info.preset, engineName));
}

TensorRole chipRoleFor(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Batch: return TensorRole::Input;
    case MemoryKind::Parameters: return TensorRole::Param;
    case MemoryKind::Gradients: return TensorRole::Grad;
    case MemoryKind::Activations: return TensorRole::Activation;
    case MemoryKind::Optimizer: return TensorRole::Optimizer;
    case MemoryKind::Output: return TensorRole::Output;
    case MemoryKind::Buckets: return TensorRole::Grad;
    case MemoryKind::Gathered: return TensorRole::Param;
  }
  return TensorRole::Input;
}

QString sampleNumbersText(int64_t first, int64_t count) {
  if (count <= 0) return QString();
  if (count > 3) return QStringLiteral("%1–%2").arg(first).arg(first + count - 1);
  QStringList rows;
  for (int64_t r = first; r < first + count; ++r) rows << QString::number(r);
  return rows.join(QStringLiteral(", "));
}

QString sampleRowsText(int64_t first, int64_t count) {
  if (count <= 0) return QObject::tr("no samples");
  if (count == 1) return QObject::tr("sample %1").arg(sampleNumbersText(first, count));
  return QObject::tr("samples %1").arg(sampleNumbersText(first, count));
}

QString chipHoverCard(const ChipView& chip) {
  QString html = QStringLiteral("<b>%1</b>").arg(chip.text.toHtmlEscaped());
  if (chip.tensors.isEmpty()) return html + QObject::tr("<br>Click to inspect.");
  html += QObject::tr(" — %1 of %2 memory").arg(bytesText(chip.tensors), QLatin1String(dpv::memory_kind_name(chip.kind)));
  html += QStringLiteral("<table cellspacing='0' cellpadding='2'>");
  const int shown = std::min<int>(static_cast<int>(chip.tensors.size()), 6);
  for (int i = 0; i < shown; ++i) {
    const dpv::TensorInfo& t = chip.tensors[i];
    html += QStringLiteral("<tr><td><b>%1</b> %2 %3 · %4%5<br><tt>%6</tt><br><i>%7</i></td></tr>")
                .arg(QString::fromStdString(t.name).toHtmlEscaped(), formatShape(t.shape), QString::fromLatin1(dpv::dtype_name(t.dtype)),
                     formatBytes(static_cast<double>(t.bytes)), t.view ? QObject::tr(" (a view, no memory of its own)") : QString(),
                     valuesText(t, 5).toHtmlEscaped(), QString::fromStdString(t.why).toHtmlEscaped());
  }
  html += QStringLiteral("</table>");
  if (chip.tensors.size() > shown) html += QObject::tr("… and %1 more. Click to inspect them all.").arg(chip.tensors.size() - shown);
  return html;
}

int chipSlot(TensorRole role) {
  switch (role) {
    case TensorRole::Input:
    case TensorRole::Target: return 0;
    case TensorRole::Param:
    case TensorRole::Buffer: return 1;
    case TensorRole::Activation: return 2;
    case TensorRole::Output:
    case TensorRole::Loss: return 3;
    case TensorRole::Grad: return 4;
    case TensorRole::Optimizer: return 5;
  }
  return kChipSlots - 1;
}

namespace {

// The box's title and subtitle, and the shorter subtitles to offer where room is short: GPU 0
// keeps "output device", then "output"; a simulated device keeps "on CPU".
void setTitles(DeviceView& view, const IterationInfo& info, int d) {
  IterationInfo::DeviceTitle title{info.deviceLabels.at(d), QString(), false};  // an info without titles: the label whole
  if (d < static_cast<int>(info.deviceTitles.size())) title = info.deviceTitles[static_cast<size_t>(d)];
  view.title = title.name;
  view.subtitle = title.detail;
  if (d == 0) {
    view.subtitle += (view.subtitle.isEmpty() ? QString() : QStringLiteral(" · ")) + QObject::tr("output device");
    if (!title.detail.isEmpty()) view.shorterSubtitles << QObject::tr("output device") << title.detail;
    view.shorterSubtitles << QObject::tr("output");
  }
  if (title.simulated) view.shorterSubtitles << QObject::tr("on CPU");
}

}  // namespace

SceneState sceneStateFor(const IterationInfo& info, const dpv::StageEvent* event) {
  SceneState state;
  const int n = static_cast<int>(info.deviceLabels.size());
  state.started = event != nullptr;
  if (event) {
    state.stageIndex = event->index;
    state.kind = event->stage.kind;
    state.layer = event->stage.layer;
  }
  const bool scattered = event != nullptr;  // Scatter is always the first stage
  for (int d = 0; d < n; ++d) {
    DeviceView view;
    view.device = d;
    setTitles(view, info, d);

    const dpv::DeviceState* ds = nullptr;
    const std::vector<dpv::DeviceState>& states = event ? event->devices : info.devicesBefore;
    for (const auto& st : states) {
      if (st.device == d) ds = &st;
    }
    if (ds) {
      // The engine's snapshot is the whole truth: one chip per part of memory that holds something.
      view.hasReplica = event && ds->has_replica;
      view.replicaDiscarded = ds->replica_discarded;
      view.chunkRows = event ? ds->chunk_rows : 0;
      view.memoryBytes = ds->memory_bytes;
      view.memoryPeak = ds->memory_peak;
      view.memory = ds->memory;
      std::map<int, QList<dpv::TensorInfo>> byPart;
      for (dpv::TensorInfo t : ds->tensors) {
        // Parameters, buffers, their gradients and momentum by the names the code panel's program
        // gives them ("grad linear.weight"): the engine says which entry each belongs to.
        if (!t.state_entry.empty()) {
          const std::string program = programParameterName(info, t.state_entry).toStdString();
          if (const size_t at = t.name.find(t.state_entry); at != std::string::npos) t.name.replace(at, t.state_entry.size(), program);
        }
        byPart[static_cast<int>(t.memory)].append(t);
      }
      for (const auto& [part, group] : byPart) {
        const auto kind = static_cast<dpv::MemoryKind>(part);
        view.chips.append(chipOf(kind, group, d));
      }
      std::stable_sort(view.chips.begin(), view.chips.end(),
                       [](const ChipView& a, const ChipView& b) { return chipSlot(a.role) < chipSlot(b.role); });
    } else if (event && d < static_cast<int>(event->chunk_sizes.size())) {
      // An event without a snapshot: what the chunk sizes alone say.
      view.chunkRows = event->chunk_sizes[static_cast<size_t>(d)];
      int64_t first = 0;
      for (int j = 0; j < d; ++j) first += event->chunk_sizes[static_cast<size_t>(j)];
      if (view.chunkRows > 0) {
        view.chips.append(ChipView{TensorRole::Input, dpv::MemoryKind::Batch,
                                   QObject::tr("input chunk: %1").arg(sampleRowsText(first, view.chunkRows)), {}, true, d});
      }
    }
    // A device that got no rows of the batch sits the iteration out (torch.chunk made fewer chunks).
    view.idle = scattered && view.chunkRows == 0 && !view.hasReplica;

    auto hasRole = [&](TensorRole role) {
      for (const auto& c : view.chips) {
        if (c.role == role) return true;
      }
      return false;
    };

    if (event) {
      QStringList notes;
      for (const auto& bn : event->batchnorm) {
        if (bn.device != d || bn.mean.empty()) continue;
        // Whole-batch statistics (device -1) of the same layer, when BatchNorm is synchronised.
        const dpv::BatchNormStats* merged = nullptr;
        for (const auto& g : event->batchnorm) {
          if (g.device == -1 && g.layer == bn.layer && !g.mean.empty()) merged = &g;
        }
        if (merged) {
          notes << QObject::tr("BN mean[0]: this chunk %1, whole batch %2 (used, as DDP + SyncBatchNorm)")
                       .arg(bn.mean[0], 0, 'f', 3).arg(merged->mean[0], 0, 'f', 3);
        } else {
          notes << QObject::tr("BN mean[0] %1, var[0] %2 (this chunk)").arg(bn.mean[0], 0, 'f', 3).arg(bn.var[0], 0, 'f', 3);
        }
      }
      if (event->stage.kind == dpv::StageKind::ReduceGrads && d == 0 && hasRole(TensorRole::Grad)) {
        notes << QObject::tr("all replicas' gradients summed here");
      }
      if (event->stage.kind == dpv::StageKind::Step && d == 0) notes << QObject::tr("weights updated by SGD");
      if (event->stage.kind == dpv::StageKind::Gather && d == 0) notes << QObject::tr("outputs joined here");
      if (view.replicaDiscarded) notes << QObject::tr("replica freed after the backward");
      view.note = notes.join(QStringLiteral("; "));
    }
    state.devices.append(view);
  }
  if (event) fillCard(state, *event, info, n);
  return state;
}

}  // namespace gui
