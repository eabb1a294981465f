#include "gui/iteration/scene_model.h"

#include <QObject>
#include <QPair>
#include <map>

namespace gui {

namespace {

using dpv::TensorRole;

TensorRole roleOf(const dpv::TensorInfo& t) {
  return t.role == TensorRole::Buffer ? TensorRole::Param : t.role;  // shown with the parameters
}

size_t totalBytes(const QList<dpv::TensorInfo>& ts) {
  size_t b = 0;
  for (const auto& t : ts) b += t.bytes;
  return b;
}

QString chipText(TensorRole role, const QList<dpv::TensorInfo>& ts) {
  const dpv::TensorInfo& last = ts.back();
  const QString name = QString::fromStdString(last.name);
  if (role == TensorRole::Param) {
    return QObject::tr("params ×%1 · %2")
        .arg(ts.size())
        .arg(formatBytes(static_cast<double>(totalBytes(ts))));
  }
  if (role == TensorRole::Grad) {
    return QObject::tr("grads ×%1 · %2").arg(ts.size()).arg(formatBytes(static_cast<double>(totalBytes(ts))));
  }
  if (role == TensorRole::Loss && !last.head.empty()) {
    return QObject::tr("loss = %1").arg(last.head.front(), 0, 'f', 4);
  }
  // One tensor per chip otherwise; several of one role: show the latest (e.g. the newest activation).
  return QStringLiteral("%1 %2").arg(name, formatShape(last.shape));
}

}  // namespace

int chipSlot(TensorRole role) {
  switch (role) {
    case TensorRole::Input: return 0;
    case TensorRole::Target: return 1;
    case TensorRole::Param:
    case TensorRole::Buffer: return 2;
    case TensorRole::Activation: return 3;
    case TensorRole::Output: return 4;
    case TensorRole::Loss: return 5;
    case TensorRole::Grad: return 6;
  }
  return kChipSlots - 1;
}

QPair<QString, QString> splitDeviceLabel(const QString& label) {
  const int open = static_cast<int>(label.indexOf(QLatin1Char('(')));
  if (open > 0 && label.endsWith(QLatin1Char(')'))) {
    return {label.left(open).trimmed(), label.mid(open + 1, label.size() - open - 2)};
  }
  return {label, QString()};
}

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
    const auto [title, subtitle] = splitDeviceLabel(info.deviceLabels.at(d));
    view.title = title;
    view.subtitle = subtitle;
    if (d == 0) view.subtitle += (view.subtitle.isEmpty() ? QString() : QStringLiteral(" · ")) + QObject::tr("output device");

    const dpv::DeviceState* ds = nullptr;
    if (event) {
      for (const auto& s : event->devices) {
        if (s.device == d) ds = &s;
      }
    }
    if (ds) {
      view.hasReplica = ds->has_replica;
      view.chunkRows = ds->chunk_rows;
      view.memoryBytes = ds->memory_bytes;
      view.memoryPeak = ds->memory_peak;
      std::map<int, QPair<TensorRole, QList<dpv::TensorInfo>>> byRole;
      for (const auto& t : ds->tensors) {
        const TensorRole role = roleOf(t);
        auto& slot = byRole[chipSlot(role)];
        slot.first = role;
        slot.second.append(t);
      }
      for (const auto& [slot, group] : byRole) {
        view.chips.append(ChipView{group.first, chipText(group.first, group.second), group.second, false});
      }
    } else if (event && d < static_cast<int>(event->chunk_sizes.size())) {
      view.chunkRows = event->chunk_sizes[static_cast<size_t>(d)];
    }
    // A device that got no rows of the batch sits the iteration out (torch.chunk made fewer chunks).
    view.idle = scattered && view.chunkRows == 0 && !view.hasReplica;

    // Keep the picture readable if a snapshot lists no tensors for what it says is there.
    auto hasRole = [&](TensorRole role) {
      for (const auto& c : view.chips) {
        if (c.role == role) return true;
      }
      return false;
    };
    if (scattered && view.chunkRows > 0 && !hasRole(TensorRole::Input)) {
      view.chips.prepend(ChipView{TensorRole::Input, QObject::tr("input chunk: %1 rows").arg(view.chunkRows), {}, true});
    }
    if (view.hasReplica && !hasRole(TensorRole::Param)) {
      ChipView params{TensorRole::Param, d == 0 ? QObject::tr("params (original)") : QObject::tr("params (copy)"), {}, true};
      int at = 0;
      while (at < view.chips.size() && chipSlot(view.chips[at].role) < chipSlot(params.role)) ++at;
      view.chips.insert(at, params);
    }

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
      view.note = notes.join(QStringLiteral("; "));
    }
    state.devices.append(view);
  }
  return state;
}

}  // namespace gui
