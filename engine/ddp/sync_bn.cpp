// SyncBatchNorm over a ProcessGroup, one rank's part.
#include "engine/ddp/sync_bn.h"

#include "engine/backend.h"
#include "engine/error.h"

namespace dpv {

Tensor sync_bn_forward(const BatchNorm& bn, LayerRun& run, const Tensor& x, ProcessGroup& group, CommThread& comm,
                       std::vector<CollectiveReport>& reports, BatchNormStats& local, BatchNormStats& global) {
  const int64_t C = bn.num_features();
  const int world = group.size();
  const auto& device = run.replica.device;
  Tensor mean, var_b;
  // SyncBatchNorm only raises the one-value error when it runs on a single rank.
  bn.local_stats(run, x, mean, var_b, /*single_check=*/world < 2);
  Tensor invstd = Tensor::empty({C}, x.dtype(), device);
  run.backend.bn_invstd(var_b, bn.eps(), invstd);
  const auto l = bn.layout(x.shape());
  const double count = static_cast<double>(l.N * l.S);
  // [mean(C), invstd(C), count(1)] packed as torch.nn.modules._functions.SyncBatchNorm does.
  Tensor packed = Tensor::empty({2 * C + 1}, x.dtype(), device);
  packed.slice0(0, C).copy_from(mean);
  packed.slice0(C, 2 * C).copy_from(invstd);
  packed.slice0(2 * C, 2 * C + 1).copy_from(Tensor::full({1}, x.dtype(), count));
  Tensor gathered = Tensor::empty({world * (2 * C + 1)}, x.dtype(), device);  // [world * (2C + 1)]
  comm.run([&] { reports.push_back(group.all_gather(packed, gathered)); });
  std::vector<double> counts;
  const auto host = gathered.to_doubles();
  double total = 0;
  for (int w = 0; w < world; ++w) {
    counts.push_back(host[static_cast<size_t>(w * (2 * C + 1) + 2 * C)]);
    total += counts.back();
  }
  Tensor mean_all = Tensor::empty({world, C}, x.dtype(), device);    // [world, C]
  Tensor invstd_all = Tensor::empty({world, C}, x.dtype(), device);  // [world, C]
  for (int w = 0; w < world; ++w) {
    const int64_t base = w * (2 * C + 1);
    mean_all.slice0(w, w + 1).copy_from(gathered.slice0(base, base + C));
    invstd_all.slice0(w, w + 1).copy_from(gathered.slice0(base + C, base + 2 * C));
  }
  Tensor gmean = Tensor::empty({C}, x.dtype(), device);
  Tensor ginvstd = Tensor::empty({C}, x.dtype(), device);
  run.backend.bn_gather_stats(mean_all, invstd_all, counts, bn.eps(), bn.momentum(), run.buffer("running_mean"),
                              run.buffer("running_var"), gmean, ginvstd, world, C);
  bn.count_batch(run);
  // The variance the merged statistics normalise with, rebuilt from invstd as PyTorch holds it.
  std::vector<double> is = ginvstd.to_doubles(), gv(static_cast<size_t>(C));
  for (size_t c = 0; c < gv.size(); ++c) gv[c] = 1.0 / (is[c] * is[c]) - bn.eps();
  Tensor gvar = Tensor::from_doubles({C}, x.dtype(), gv);
  local = {-1, -1, mean.to_doubles(), var_b.to_doubles(), count};
  global = {-1, -1, gmean.to_doubles(), gv, total};
  return bn.normalize(run, x, gmean, ginvstd, gvar, total);
}

Tensor sync_bn_backward(const BatchNorm& bn, LayerRun& run, const Tensor& dy, ProcessGroup& group, CommThread& comm,
                        std::vector<CollectiveReport>& reports) {
  const int64_t C = bn.num_features();
  Tensor sum_dy, sum_dy_xmu;
  bn.backward_reduce(run, dy, sum_dy, sum_dy_xmu);
  Tensor packed = Tensor::empty({2 * C}, sum_dy.dtype(), run.replica.device);  // [sum_dy(C), sum_dy_xmu(C)]
  packed.slice0(0, C).copy_from(sum_dy);
  packed.slice0(C, 2 * C).copy_from(sum_dy_xmu);
  comm.run([&] { reports.push_back(group.all_reduce_sum(packed)); });
  return bn.backward_elemt(run, dy, packed.slice0(0, C), packed.slice0(C, 2 * C), run.cache.count);
}

}  // namespace dpv
