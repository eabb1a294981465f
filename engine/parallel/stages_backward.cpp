// Gather's backward (scatter of the output gradient), Backward (plain and SyncBatchNorm),
// ReduceGrads and the optimizer Step.
#include "engine/backend.h"
#include "engine/error.h"
#include "engine/index.h"
#include "engine/layers/batchnorm.h"
#include "engine/parallel/iteration_impl.h"

namespace dpv {

void Iteration::Impl::grad_scatter(StageEvent& e) {
  // Gather.backward = Scatter with the exact forward sizes (split_with_sizes).
  run_replicas([&](int j) {
    const Tensor view = chunk_of(dlogits, j);
    flow[ix(j)] = j == 0 ? view : view.to(devs.shared(j));
  }, static_cast<int64_t>(dlogits.nbytes()));
  for (int j = 0; j < R; ++j) {
    flow_name[ix(j)] = {"grad of output"};
    if (j > 0) e.bytes_moved += flow[ix(j)].nbytes();
  }
  if (describe)
    e.summary = "Gather's backward: the gradient of the loss with respect to the gathered output is split with the "
                "forward's chunk sizes and sent back to the replicas' devices.";
}

void Iteration::Impl::backward(StageEvent& e, int layer) {
  if (layer == tr.model().num_layers() - 1 && !multi) {
    flow[0] = dlogits;  // one device: the loss gradient is already where the output is
  }
  Layer& l = tr.model().layer(layer);
  run_replicas([&](int j) {
    LayerRun run = layer_run(j, layer);
    flow[ix(j)] = l.backward(run, flow[ix(j)]);
    replicas[ix(j)].caches[ix(layer)] = LayerCache{};  // what the layer saved for backward is freed once used
  });
  for (int j = 0; j < R; ++j) flow_name[ix(j)] = {"grad of activation", layer - 1, true};
  if (layer == 0 && !multi) free_graph();
  if (describe)
    e.summary = l.parameters(tr.model().dtype()).empty()
                    ? "Every replica passes the gradient back through " + l.describe() + "."
                    : "Every replica computes the gradients of " + l.describe() +
                          "'s parameters from its own chunk, and the gradient for the layer below.";
}

void Iteration::Impl::backward_sync_bn(StageEvent& e, int layer) {
  auto& bn = static_cast<BatchNorm&>(tr.model().layer(layer));
  const int64_t C = bn.num_features();
  std::vector<Tensor> sum_dy(ix(R)), sum_dy_xmu(ix(R)), packed(ix(R));
  if (layer == tr.model().num_layers() - 1 && !multi) flow[0] = dlogits;
  run_replicas([&](int j) {
    LayerRun run = layer_run(j, layer);
    bn.backward_reduce(run, flow[ix(j)], sum_dy[ix(j)], sum_dy_xmu[ix(j)]);
    Tensor p = Tensor::empty({2 * C}, sum_dy[ix(j)].dtype(), run.replica.device);
    p.slice0(0, C).copy_from(sum_dy[ix(j)]);
    p.slice0(C, 2 * C).copy_from(sum_dy_xmu[ix(j)]);
    packed[ix(j)] = p;
  });
  e.collectives.push_back(tr.collectives().all_reduce(packed));
  const double total = replicas[0].caches[ix(layer)].count;  // the forward's total count
  run_replicas([&](int j) {
    LayerRun run = layer_run(j, layer);
    const Tensor& p = packed[ix(j)];
    flow[ix(j)] = bn.backward_elemt(run, flow[ix(j)], p.slice0(0, C), p.slice0(C, 2 * C), total);
    replicas[ix(j)].caches[ix(layer)] = LayerCache{};
  });
  for (int j = 0; j < R; ++j) flow_name[ix(j)] = {"grad of activation", layer - 1, true};
  if (describe)
    e.summary = "SyncBatchNorm backward: each replica reduces sum(dy) and sum(dy*(x-mean)) over its chunk, the sums "
                "are all-reduced, and every replica forms its input gradient with the whole batch's count. The "
                "weight and bias gradients stay local and are summed by the reduce stage.";
}

void Iteration::Impl::reduce_grads(StageEvent& e) {
  CollectiveReport total;
  total.op = CollectiveOp::ReduceAdd;
  total.ranks = R;
  const double start = now();
  for (const auto& d : tr.model().parameter_decls()) {
    std::vector<Tensor> bufs;
    for (int j = 0; j < R; ++j) bufs.push_back(replicas[ix(j)].grads.at(d.name, "the replica's gradients"));
    if (R > 1) {
      CollectiveReport r = tr.collectives().reduce_add(bufs, 0);
      total.bytes += r.bytes;
      total.seconds += r.seconds;
      e.bytes_moved += r.bytes * ix(R - 1);
    }
    tr.grads().set(d.name, bufs[0]);
  }
  finish_collective_stage(e, total, start);
  grads_reduced = true;
  free_graph();
  if (describe)
    e.summary = R > 1 ? "Broadcast's backward (ReduceAddCoalesced): every parameter's gradients from the " +
                            std::to_string(R) + " replicas are SUMMED onto device 0, not averaged. The loss's 1/N "
                            "already makes the sum equal the single-device gradient."
                      : "One replica: its gradients already are the module's gradients on device 0.";
}

void Iteration::Impl::free_graph() {
  for (int j = 0; j < R; ++j) {
    Replica& rep = replicas[ix(j)];
    for (auto& c : rep.caches) c = LayerCache{};
    flow[ix(j)] = Tensor();
    if (j < static_cast<int>(chunk_inputs.size())) chunk_inputs[ix(j)] = Tensor();
    if (j == 0) continue;  // replica 0 is the module: its parameters and .grad stay
    rep.params = TensorMap();
    rep.buffers = TensorMap();
    rep.grads = TensorMap();
  }
  dlogits = Tensor();
  // BatchNorm's saved statistics go too; the iteration keeps the host copies of those already read
  // (a run with snapshots has read every one) and the device tensors of the others.
  if (it.snapshots_) (void)it.batchnorm_stats();
  for (size_t i = 0; i < it.bn_stats_.size() && i < it.bn_device_stats_.size(); ++i) {
    Iteration::DeviceStats& st = it.bn_device_stats_[i];
    st.mean = st.var_b = st.invstd = Tensor();
  }
  graph_freed = true;
}

void Iteration::Impl::step_optimizer(StageEvent& e) {
  if (!grads_reduced)  // one device: the replica's gradients are the module's
    for (const auto& d : tr.model().parameter_decls())
      tr.grads().set(d.name, replicas[0].grads.at(d.name, "the gradients"));
  Backend& be = devs[0].backend();
  const OptimizerSettings& o = tr.optimizer().settings();
  const double start = now();
  for (const auto& d : tr.model().parameter_decls())
    tr.optimizer().step(d.name, tr.state().at(d.name), tr.grads().at(d.name, "the gradients"), be, devs.shared(0));
  be.synchronize();
  busy_start[0] = start;
  busy_end[0] = now();
  tr.count_step();
  if (describe)
    e.summary = "optimizer.step() runs once, on device 0, on the original parameters (" +
                std::string(optimizer_class_name(o.kind)) + ", lr " + std::to_string(o.lr) +
                (o.kind == OptimizerKind::Sgd && o.momentum != 0 ? ", momentum " + std::to_string(o.momentum)
                                                                 : std::string()) +
                (o.weight_decay != 0 ? ", weight decay " + std::to_string(o.weight_decay) : std::string()) +
                "). The next forward broadcasts the new weights again.";
}

}  // namespace dpv
