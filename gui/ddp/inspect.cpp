#include "gui/ddp/inspect.h"

#include <QObject>

#include "gui/ddp/scene_model.h"

namespace gui {

namespace {

dpv::DType dtypeOf(const IterationInfo& info) {
  try {
    return dpv::parse_dtype(info.inputDtype.toStdString());
  } catch (...) {
    return dpv::DType::Float32;  // an unknown name: the default the app runs with
  }
}

dpv::TensorInfo row(const std::string& name, dpv::TensorRole role, const std::vector<double>& values, dpv::DType dtype,
                    int device, const QString& why) {
  dpv::TensorInfo t;
  t.name = name;
  t.role = role;
  t.shape = {static_cast<int64_t>(values.size())};
  t.dtype = dtype;
  t.device = device;
  t.bytes = values.size() * dpv::dtype_size(dtype);
  t.head = values;
  t.why = why.toStdString();
  return t;
}

const dpv::RankState* rankIn(const dpv::StageEvent& e, int rank) {
  for (const auto& r : e.ranks)
    if (r.rank == rank) return &r;
  return nullptr;
}

QString phaseWhy(BucketPhase phase, int ready, int total) {
  switch (phase) {
    case BucketPhase::Empty: return QObject::tr("empty: no gradient of this backward has arrived yet");
    case BucketPhase::Filling:
      return QObject::tr("filling: %1 of %2 gradients copied in, each multiplied by 1/W").arg(ready).arg(total);
    case BucketPhase::Waiting:
      return QObject::tr("full, waiting: every gradient is in (×1/W), but an earlier bucket has not been launched yet "
                         "(buckets go out in order)");
    case BucketPhase::AllReducing:
      return QObject::tr("all-reducing: the communication thread is summing it across the ranks right now");
    case BucketPhase::Done:
      return QObject::tr("done: the sum over the ranks of gradient/W, i.e. the MEAN of the ranks' gradients, the same on "
                         "every rank");
  }
  return QString();
}

}  // namespace

DdpInspection ddpInspection(const IterationInfo& info, const QList<dpv::StageEvent>& events, int shown,
                            DdpPart part, int rank, int bucket) {
  DdpInspection out;
  out.where = QObject::tr("rank %1").arg(rank);
  if (shown < 0 || shown >= static_cast<int>(events.size())) return out;
  const dpv::StageEvent& e = events[shown];
  const dpv::DType dtype = dtypeOf(info);
  const QString stage = QString::fromStdString(e.stage.title);
  QList<dpv::TensorInfo>& rows = out.chip.tensors;
  out.chip.synthesized = false;
  switch (part) {
    case DdpPart::Shard: {
      out.chip.role = dpv::TensorRole::Input;
      out.chip.kind = dpv::MemoryKind::Batch;
      const dpv::RankState* r = rankIn(e, rank);
      QStringList indices;
      for (size_t k = 0; r && k < r->samples.size(); ++k) {
        const int64_t index = r->samples[k];
        const bool pad = k < r->padding.size() && r->padding[k];
        indices << QString::number(index);
        const std::vector<double> values = k < r->sample_rows.size() ? r->sample_rows[k] : std::vector<double>{};
        dpv::TensorInfo t = row(pad ? QObject::tr("sample %1 (padding)").arg(index).toStdString()
                                    : QObject::tr("sample %1").arg(index).toStdString(),
                                dpv::TensorRole::Input, values, dtype, rank,
                                pad ? QObject::tr("Row %1 of the global batch again: the sampler repeated the first indices "
                                                  "so that every rank gets %2 samples.").arg(index).arg(r->samples.size())
                                    : QObject::tr("Row %1 of the global batch: position %2 of the padded index list, and "
                                                  "rank r takes positions r, r+W, r+2W, …").arg(index).arg(k * info.deviceLabels.size() + static_cast<size_t>(rank)));
        t.first_row = index;
        rows.append(t);
      }
      out.chip.text = QObject::tr("shard: samples %1").arg(indices.join(QStringLiteral(", ")));
      break;
    }
    case DdpPart::Bucket: {
      out.chip.role = dpv::TensorRole::Grad;
      out.chip.kind = dpv::MemoryKind::Buckets;
      QStringList params;
      for (const auto& r : e.ranks) {
        if (bucket >= static_cast<int>(r.buckets.size())) continue;
        const dpv::BucketState& b = r.buckets[static_cast<size_t>(bucket)];
        if (params.isEmpty())
          for (const auto& p : b.params) params << programParameterName(info, p);
        const BucketPhase phase = bucketPhaseOf(b);
        QString why = phaseWhy(phase, b.ready, static_cast<int>(b.params.size()));
        if (phase == BucketPhase::Filling)
          why += QObject::tr(". Its values are shown once every gradient is in (the rest of the buffer is uninitialised)");
        else if (phase == BucketPhase::AllReducing)
          why += QObject::tr(". Its values are not read while the all-reduce is writing them");
        dpv::TensorInfo t = row(QObject::tr("rank %1: bucket %2 (%3)").arg(r.rank).arg(bucket).arg(bucketPhaseName(phase)).toStdString(),
                                dpv::TensorRole::Grad, b.values, dtype, r.rank, why);
        t.shape = {static_cast<int64_t>(b.bytes / dpv::dtype_size(dtype))};
        t.bytes = b.bytes;
        t.memory = dpv::MemoryKind::Buckets;
        if (r.rank == rank) out.selectedRow = static_cast<int>(rows.size());
        rows.append(t);
      }
      out.chip.text = QObject::tr("bucket %1: %2").arg(bucket).arg(params.join(QStringLiteral(", ")));
      break;
    }
    case DdpPart::Grad: {
      out.chip.role = dpv::TensorRole::Grad;
      out.chip.kind = dpv::MemoryKind::Gradients;
      // Before averaging: the last stage up to the one shown whose ranks hold local gradients.
      const dpv::StageEvent* local = nullptr;
      for (int i = shown; i >= 0 && !local; --i) {
        const dpv::StageEvent& c = events[i];
        if (!c.ranks.empty() && c.ranks.front().grads == dpv::GradState::Local && !c.ranks.front().grad_head.empty()) local = &c;
      }
      std::string param;
      if (local) {
        for (const auto& r : local->ranks) {
          param = r.watched_param;
          if (r.rank == rank) out.selectedRow = static_cast<int>(rows.size());
          rows.append(row(QObject::tr("rank %1: grad %2, local").arg(r.rank).arg(programParameterName(info, r.watched_param)).toStdString(),
                          dpv::TensorRole::Grad, r.grad_head, dtype, r.rank,
                          QObject::tr("Before averaging (after %1): the gradient of rank %2's own shard's mean loss; the "
                                      "ranks differ.").arg(QString::fromStdString(local->stage.title)).arg(r.rank)));
        }
      }
      for (const auto& r : e.ranks) {
        if (r.grads != dpv::GradState::Averaged) continue;
        param = r.watched_param;
        if (r.rank == rank) out.selectedRow = static_cast<int>(rows.size());
        rows.append(row(QObject::tr("rank %1: grad %2, averaged").arg(r.rank).arg(programParameterName(info, r.watched_param)).toStdString(),
                        dpv::TensorRole::Grad, r.grad_head, dtype, r.rank,
                        QObject::tr("After averaging (%1): the all-reduced buckets copied back into .grad, the mean of the "
                                    "ranks' local gradients; every rank holds the same.").arg(stage)));
      }
      out.chip.text = rows.isEmpty() ? QObject::tr("no gradient yet in this iteration")
                                     : QObject::tr("grad %1, first values, every rank").arg(programParameterName(info, param));
      break;
    }
    case DdpPart::Params:
    case DdpPart::Buffers: {
      const bool params = part == DdpPart::Params;
      out.chip.role = params ? dpv::TensorRole::Param : dpv::TensorRole::Buffer;
      out.chip.kind = dpv::MemoryKind::Parameters;
      std::string name;
      for (const auto& r : e.ranks) {
        name = params ? r.watched_param : r.watched_buffer;
        const std::vector<double>& values = params ? r.param_head : r.buffer_head;
        if (values.empty()) continue;
        if (r.rank == rank) out.selectedRow = static_cast<int>(rows.size());
        rows.append(row(QObject::tr("rank %1: %2").arg(r.rank).arg(programParameterName(info, name)).toStdString(),
                        out.chip.role, values, dtype, r.rank,
                        params ? QObject::tr("Rank %1's copy after %2: rank 0's at construction, then changed only by the "
                                             "same averaged step on every rank.").arg(r.rank).arg(stage)
                               : QObject::tr("Rank %1's buffer after %2: its own running statistics, overwritten by rank "
                                             "0's at the start of each forward.").arg(r.rank).arg(stage)));
      }
      out.chip.text = QObject::tr("%1, first values, every rank").arg(programParameterName(info, name));
      break;
    }
  }
  return out;
}

}  // namespace gui
