// The DDP script and source the code panel shows come from course/ (course::ddp_program,
// course::ddp_source_program) line for line as the app used to build them by editing the
// DataParallel program's text: the old builder is kept below as the oracle (issue 25).
#include <gtest/gtest.h>

#include "engine/model_spec.h"
#include "gui/ddp/code.h"

namespace gui {
namespace {

using K = dpv::StageKind;

// ---- the builders as they were before the DDP program moved to course/ (issue 25), verbatim
QVector<CodeLine> legacyDdpScriptLines(const AppSettings& settings, int ranks, qint64 rows, qint64 bucketBytes) {
  QVector<CodeLine> out;
  auto add = [&](const QString& text, QList<K> stages = {}, int layer = -1) { out.append(CodeLine{text, stages, layer}); };
  const int W = std::max(1, ranks);
  const qint64 perRank = (rows + W - 1) / W;
  add(QStringLiteral("# torchrun --nproc_per_node=%1 train.py  (one process per device)").arg(W));
  add(QStringLiteral("import torch"));
  add(QStringLiteral("import torch.nn as nn"));
  add(QStringLiteral("import torch.distributed as dist"));
  add(QStringLiteral("from torch.nn.parallel import DistributedDataParallel as DDP"));
  add(QStringLiteral("from torch.utils.data import DataLoader, DistributedSampler"));
  add(QString());
  add(QStringLiteral("dist.init_process_group(\"gloo\")  # \"nccl\" on GPUs; RANK, WORLD_SIZE from torchrun"));
  add(QStringLiteral("rank = dist.get_rank()"));
  // The model, as the DataParallel program defines it (one text for both modes), on this rank's device.
  const QVector<CodeLine> program = userCodeLines(settings.preset, settings.syncBatchNorm, static_cast<int>(rows),
                                                  settings.learningRate, settings.devices);
  bool inModel = false;
  for (const CodeLine& line : program) {
    if (line.text.startsWith(QLatin1String("class ")) || line.text.startsWith(QLatin1String("model = nn.Sequential(")))
      inModel = true;
    if (line.text.startsWith(QLatin1String("# devices:"))) break;
    if (!inModel) continue;
    QString text = line.text;
    text.replace(QLatin1String(".cuda()"), QString());
    add(text, {}, line.layer);
  }
  add(QStringLiteral("dist._DEFAULT_FIRST_BUCKET_BYTES = %1  # the last layer's bytes: small buckets").arg(bucketBytes));
  add(QStringLiteral("model = DDP(model, bucket_cap_mb=%1 / 2**20)  # rank 0's state to all").arg(bucketBytes),
      {K::Construct});
  add(QStringLiteral("criterion = nn.CrossEntropyLoss()"));
  add(QStringLiteral("optimizer = torch.optim.SGD(model.parameters(), lr=%1)").arg(settings.learningRate));
  add(QString());
  add(QStringLiteral("# dataset: the same %1 samples on every rank").arg(rows));
  add(QStringLiteral("sampler = DistributedSampler(dataset, shuffle=False)"), {K::Sample});
  add(QStringLiteral("loader = DataLoader(dataset, batch_size=%1, sampler=sampler)  # per process").arg(perRank));
  add(QStringLiteral("for inputs, labels in loader:  # this rank's strided shard"), {K::Sample});
  add(QStringLiteral("    outputs = model(inputs)  # rank 0's buffers first, then forward"),
      {K::BroadcastBuffers, K::Forward});
  add(QStringLiteral("    loss = criterion(outputs, labels)  # this rank's own loss"), {K::Loss});
  add(QStringLiteral("    optimizer.zero_grad()"));
  add(QStringLiteral("    loss.backward()  # buckets all-reduce while it runs"), {K::Backward, K::Finalize});
  add(QStringLiteral("    optimizer.step()  # same averaged grads on every rank"), {K::Step});
  add(QStringLiteral("    if rank == 0:"));
  add(QStringLiteral("        print(f\"loss {loss.item():.4f}\")  # rank 0's loss only"));
  return out;
}

QVector<CodeLine> legacyDdpSourceLines() {
  QVector<CodeLine> out;
  auto add = [&](const QString& text, QList<K> stages = {}) { out.append(CodeLine{text, stages, -1}); };
  add(QStringLiteral("# torch/nn/parallel/distributed.py (PyTorch 1.13, abridged)"));
  add(QStringLiteral("# DistributedDataParallel.__init__, lines 646-663"));
  add(QStringLiteral("self.bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)"));
  add(QStringLiteral("_verify_param_shape_across_processes(self.process_group, parameters)"), {K::Construct});
  add(QStringLiteral("_sync_module_states(module=self.module, ..., src=0)  # broadcast"), {K::Construct});
  add(QStringLiteral("# _ddp_init_helper, lines 720-751: iteration 1 has ONE bucket"));
  add(QStringLiteral("bucket_size_limits = [sys.maxsize]"), {K::Construct});
  add(QStringLiteral("self.reducer = dist.Reducer(parameters, ..., dist._DEFAULT_FIRST_BUCKET_BYTES)"),
      {K::Construct});
  add(QString());
  add(QStringLiteral("# torch/utils/data/distributed.py, DistributedSampler.__iter__, lines 97-121"));
  add(QStringLiteral("indices = list(range(len(self.dataset)))"), {K::Sample});
  add(QStringLiteral("indices += indices[:padding_size]  # pad by repeating the start"), {K::Sample});
  add(QStringLiteral("indices = indices[self.rank:self.total_size:self.num_replicas]"), {K::Sample});
  add(QString());
  add(QStringLiteral("# DistributedDataParallel.forward, lines 1005-1058"));
  add(QStringLiteral("self.reducer.prepare_for_forward()"));
  add(QStringLiteral("if self.reducer._rebuild_buckets(): ...  # once, before the 2nd forward"));
  add(QStringLiteral("if self._check_sync_bufs_pre_fwd():"), {K::BroadcastBuffers});
  add(QStringLiteral("    self._sync_buffers()  # rank 0's buffers to every rank"), {K::BroadcastBuffers});
  add(QStringLiteral("output = self._run_ddp_forward(*inputs, **kwargs)"), {K::Forward});
  add(QStringLiteral("self.reducer.prepare_for_backward([])"));
  add(QStringLiteral("# the loss is the user's code: never averaged across ranks"), {K::Loss});
  add(QString());
  add(QStringLiteral("# torch/csrc/distributed/c10d/reducer.cpp, during loss.backward()"));
  add(QStringLiteral("# autograd_hook -> mark_variable_ready: grad * (1/W) into its bucket"), {K::Backward});
  add(QStringLiteral("# mark_bucket_ready: all_reduce full buckets, strictly in order"), {K::Backward});
  add(QStringLiteral("# finalize_backward: wait for the all-reduces, copy into .grad"), {K::Finalize});
  add(QString());
  add(QStringLiteral("# torch/optim/sgd.py, SGD.step (line 120): every rank, same grads"), {K::Step});
  add(QStringLiteral("param.add_(grad, alpha=-lr)"), {K::Step});
  return out;
}

// ---- the comparison

void expectSameLines(const QVector<CodeLine>& expected, const QVector<CodeLine>& actual, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (int i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(expected[i].text.toStdString(), actual[i].text.toStdString()) << what << " line " << i;
    EXPECT_EQ(expected[i].stages, actual[i].stages) << what << " line " << i;
    EXPECT_EQ(expected[i].layer, actual[i].layer) << what << " line " << i;
  }
}

TEST(DdpCode, TheScriptIsTheOneTheAppShowedForEveryPresetAndSetting) {
  std::vector<std::string> presets = dpv::preset_names();
  presets.push_back("no-such-preset");  // falls back to the seed's SimpleModel, as before
  for (const std::string& preset : presets) {
    for (bool syncBatchNorm : {false, true}) {
      for (double lr : {0.01, 0.1, 0.05, 1e-5, 0.123456789, 2.0}) {
        AppSettings settings;
        settings.preset = QString::fromStdString(preset);
        settings.syncBatchNorm = syncBatchNorm;
        settings.learningRate = lr;
        for (const auto& [ranks, rows, bucketBytes] : {std::tuple{4, 10, 40}, std::tuple{1, 32, 1048576}, std::tuple{3, 7, 0},
                                                        std::tuple{0, 10, 88}}) {
          const std::string what = preset + (syncBatchNorm ? " sync_bn" : "") + " lr " + std::to_string(lr) + " ranks " +
                                   std::to_string(ranks) + " rows " + std::to_string(rows);
          expectSameLines(legacyDdpScriptLines(settings, ranks, rows, bucketBytes), ddpScriptLines(settings, ranks, rows, bucketBytes),
                          what);
        }
      }
    }
  }
}

TEST(DdpCode, TheSourceIsTheOneTheAppShowed) { expectSameLines(legacyDdpSourceLines(), ddpSourceLines(), "source"); }

}  // namespace
}  // namespace gui
