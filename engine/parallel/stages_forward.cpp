// Scatter, Replicate, Forward (plain and SyncBatchNorm), Gather and Loss.
#include "engine/backend.h"
#include "engine/error.h"
#include "engine/index.h"
#include "engine/layers/batchnorm.h"
#include "engine/parallel/iteration_impl.h"

namespace dpv {

Iteration::Impl::Impl(Iteration& iteration, Trainer& trainer)
    : it(iteration), tr(trainer), devs(trainer.devices()), t0(std::chrono::steady_clock::now()) {
  R = static_cast<int>(it.chunks_.size());
  int64_t begin = 0;
  for (int64_t c : it.chunks_) {
    chunk_begin.push_back(begin);
    begin += c;
  }
  multi = devs.size() > 1;
  busy_start.assign(ix(devs.size()), 0.0);
  busy_end.assign(ix(devs.size()), 0.0);
  for (int d = 0; d < devs.size(); ++d) devs[d].memory().reset_peak();
  replicas.resize(ix(R));
  for (int j = 0; j < R; ++j) {
    replicas[ix(j)].device = devs.shared(j);
    replicas[ix(j)].caches.resize(ix(tr.model().num_layers()));
  }
  // Replica 0 is the original module: its parameters alias the original storage and its buffers
  // are the original buffers (replicate.py gives device_ids[0] the very same tensors).
  Replica& r0 = replicas[0];
  r0.params.items().reserve(tr.model().parameter_decls().size());
  r0.buffers.items().reserve(tr.model().buffer_decls().size());
  r0.grads.items().reserve(tr.model().parameter_decls().size());
  for (const auto& d : tr.model().parameter_decls()) r0.params.set(d.name, tr.state().at(d.name));
  for (const auto& d : tr.model().buffer_decls()) r0.buffers.set(d.name, tr.state().at(d.name));
  flow.resize(ix(R));
  flow_name.resize(ix(R));
}

double Iteration::Impl::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Iteration::Impl::reset_busy() {
  const double t = now();
  std::fill(busy_start.begin(), busy_start.end(), t);
  std::fill(busy_end.begin(), busy_end.end(), t);
}

void Iteration::Impl::run_replicas(const std::function<void(int)>& fn, int64_t bytes_moved) {
  auto body = [&](int j) {
    busy_start[ix(j)] = now();
    fn(j);
    devs[j].backend().synchronize();
    busy_end[ix(j)] = now();
  };
  if (R == 1) {  // one replica runs on this thread, as the device set would run it, without a list of errors
    try {
      body(0);
    } catch (...) {
      rethrow_replica_error(std::current_exception(), 0);
    }
    return;
  }
  auto errors = devs.run_parallel_collect(R, body, bytes_moved);
  for (int j = 0; j < R; ++j)
    if (errors[ix(j)]) rethrow_replica_error(errors[ix(j)], j);
}

void Iteration::Impl::rethrow_replica_error(const std::exception_ptr& error, int j) const {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    if (!multi) throw;  // one device: the module is called directly, nothing is wrapped
    throw e.reworded("Caught " + e.kind() + " in replica " + std::to_string(j) + " on device " + std::to_string(j) +
                     ". " + e.what())
        .at_replica(j, j);
  }
}

Tensor Iteration::Impl::chunk_of(const Tensor& t, int j) const {
  const auto b = chunk_begin[ix(j)];
  return t.slice0(b, b + it.chunks_[ix(j)]);
}

void Iteration::Impl::finish_collective_stage(StageEvent& e, CollectiveReport& total, double start) {
  const double end = now();
  for (int j = 0; j < R; ++j) {
    busy_start[ix(j)] = start;
    busy_end[ix(j)] = end;
  }
  if (R > 1) {
    finish_report(total);
    e.collectives.push_back(total);
  }
}

LayerRun Iteration::Impl::layer_run(int j, int layer) {
  Replica& rep = replicas[ix(j)];
  LayerRun run{rep.device->backend(), rep, rep.caches[ix(layer)], tr.model().layer_prefix(layer)};
  run.need_input_grad = layer > 0;
  const Model& model = tr.model();
  // BatchNorm + ReLU in one pass when nobody looks at the BatchNorm's own output in this stage's
  // snapshot (one built on demand later rebuilds it: BatchNorm::output_before_relu).
  run.fuse_next_relu = !it.snapshots_ && model.layer(layer).is_batchnorm() && layer + 1 < model.num_layers() &&
                       model.layer(layer + 1).is_relu();
  run.relu_done_before = layer > 0 && rep.caches[ix(layer - 1)].relu_fused;
  return run;
}

void Iteration::Impl::scatter(StageEvent& e) {
  const auto& chunks = it.chunks_;
  chunk_inputs.resize(ix(R));
  run_replicas([&](int j) {
    const Tensor view = chunk_of(input_dev0, j);
    // A chunk already on its target device is a view, not a copy (chunk 0 on device 0).
    chunk_inputs[ix(j)] = j == 0 ? view : view.to(devs.shared(j));
  }, static_cast<int64_t>(input_dev0.nbytes()));
  for (int j = 0; j < R; ++j) {
    flow[ix(j)] = chunk_inputs[ix(j)];
    flow_name[ix(j)] = {"input chunk"};
    if (j > 0) e.bytes_moved += chunk_inputs[ix(j)].nbytes();
  }
  if (!describe) return;
  std::string sizes;
  for (size_t j = 0; j < chunks.size(); ++j) sizes += (j ? ", " : "") + std::to_string(chunks[j]);
  const int idle = devs.size() - R;
  e.summary = multi ? "torch.chunk split " + std::to_string(input_dev0.dim(0)) + " samples into " + std::to_string(R) +
                          " chunk" + (R == 1 ? "" : "s") + " of " + sizes + " (ceil(N/k) = " +
                          std::to_string(chunks[0]) + " rows each, the last takes the rest)" +
                          (idle > 0 ? "; " + std::to_string(idle) + " device" + (idle == 1 ? " stays" : "s stay") + " idle"
                                    : "")
                    : "One device: the whole batch of " + std::to_string(input_dev0.dim(0)) +
                          " samples goes to device 0; no scatter across devices.";
}

void Iteration::Impl::replicate(StageEvent& e) {
  CollectiveReport total;
  total.op = CollectiveOp::Broadcast;
  total.ranks = R;
  auto broadcast_all = [&](const std::vector<TensorDecl>& decls, bool params) {
    for (const auto& d : decls) {
      std::vector<Tensor> bufs;
      bufs.push_back(tr.state().at(d.name));
      for (int j = 1; j < R; ++j) {
        Tensor copy = Tensor::empty(d.shape, d.dtype, devs.shared(j));
        bufs.push_back(copy);
        (params ? replicas[ix(j)].params : replicas[ix(j)].buffers).set(d.name, copy);
      }
      if (R > 1) {
        CollectiveReport r = tr.collectives().broadcast(bufs, 0);
        total.bytes += r.bytes;
        total.seconds += r.seconds;
        e.bytes_moved += r.bytes * ix(R - 1);
      }
    }
  };
  const double start = now();
  broadcast_all(tr.model().parameter_decls(), true);
  broadcast_all(tr.model().buffer_decls(), false);
  finish_collective_stage(e, total, start);
  if (describe)
    e.summary = R > 1 ? "Parameters and buffers broadcast from device 0 to " + std::to_string(R - 1) +
                            " device" + (R == 2 ? "" : "s") + ". Replica 0 is the original module itself: same parameter "
                            "storage, same BatchNorm buffers."
                      : "Only one chunk, so one replica: the original module on device 0; nothing to broadcast.";
}


void Iteration::Impl::forward(StageEvent& e, int layer) {
  Layer& l = tr.model().layer(layer);
  run_replicas([&](int j) {
    LayerRun run = layer_run(j, layer);
    flow[ix(j)] = l.forward(run, flow[ix(j)]);
  });
  for (int j = 0; j < R; ++j) flow_name[ix(j)] = {"activation", layer, true};
  if (l.is_batchnorm()) {
    for (int j = 0; j < R; ++j) {
      const LayerCache& c = replicas[ix(j)].caches[ix(layer)];
      it.bn_device_stats_.push_back({layer, j, c.aux, c.var_b, Tensor(), 0.0, c.count});
    }
    // SyncBatchNorm on one replica (one device, or a batch too small to split) has nothing to
    // merge: the whole batch's statistics are the replica's own, and they are reported as global
    // like any synchronised run reports them.
    if (tr.options().sync_bn && R == 1) {
      const LayerCache& c = replicas[0].caches[ix(layer)];
      it.bn_device_stats_.push_back({layer, -1, c.aux, c.var_b, Tensor(), 0.0, c.count});
    }
    if (describe)
      e.summary = "Each replica normalises its chunk with its own chunk's mean and variance. Only replica 0's "
                  "running statistics update lands in the model; the other replicas' updates are discarded.";
  } else if (describe) {
    e.summary = "Every replica runs " + l.describe() + " on its own chunk, in parallel.";
  }
}

void Iteration::Impl::forward_sync_bn(StageEvent& e, int layer) {
  auto& bn = static_cast<BatchNorm&>(tr.model().layer(layer));
  const int64_t C = bn.num_features();
  std::vector<Tensor> mean(ix(R)), var_b(ix(R)), packed(ix(R));
  // The counts travel in the packed statistics as PyTorch packs them, but the host knows them
  // already (chunk rows times spatial size), so nothing is read back from the devices.
  std::vector<double> counts(ix(R));
  // 1. Local statistics; SyncBatchNorm skips the one-value check when more than one rank takes part.
  run_replicas([&](int j) {
    LayerRun run = layer_run(j, layer);
    const Tensor& x = flow[ix(j)];
    bn.local_stats(run, x, mean[ix(j)], var_b[ix(j)], false);
    Tensor invstd = Tensor::empty({C}, x.dtype(), run.replica.device);
    run.backend.bn_invstd(var_b[ix(j)], bn.eps(), invstd);
    // [mean(C), invstd(C), count(1)] as torch.nn.modules._functions.SyncBatchNorm packs it.
    const auto l = bn.layout(x.shape());
    Tensor p = Tensor::empty({2 * C + 1}, x.dtype(), run.replica.device);
    p.slice0(0, C).copy_from(mean[ix(j)]);
    p.slice0(C, 2 * C).copy_from(invstd);
    counts[ix(j)] = static_cast<double>(l.N * l.S);
    Tensor count = p.slice0(2 * C, 2 * C + 1);
    run.backend.fill(count, counts[ix(j)]);
    packed[ix(j)] = p;
  });
  // 2. All-gather the packed statistics (counts differ, so not an all-reduce).
  std::vector<Tensor> gathered;
  for (int j = 0; j < R; ++j)
    gathered.push_back(Tensor::empty({R * (2 * C + 1)}, packed[0].dtype(), devs.shared(j)));
  e.collectives.push_back(tr.collectives().all_gather(packed, gathered));
  // 3. Merge (batch_norm_gather_stats_with_counts) and normalise with the global statistics.
  double total = 0;
  for (double c : counts) total += c;
  Tensor global_mean0, global_invstd0;
  run_replicas([&](int j) {
    LayerRun run = layer_run(j, layer);
    const Tensor& x = flow[ix(j)];
    const Tensor& g = gathered[ix(j)];
    Tensor mean_all = Tensor::empty({R, C}, x.dtype(), run.replica.device);
    Tensor invstd_all = Tensor::empty({R, C}, x.dtype(), run.replica.device);
    for (int w = 0; w < R; ++w) {
      const int64_t base = w * (2 * C + 1);
      mean_all.slice0(w, w + 1).copy_from(g.slice0(base, base + C));
      invstd_all.slice0(w, w + 1).copy_from(g.slice0(base + C, base + 2 * C));
    }
    Tensor gmean = Tensor::empty({C}, x.dtype(), run.replica.device);
    Tensor ginvstd = Tensor::empty({C}, x.dtype(), run.replica.device);
    run.backend.bn_gather_stats(mean_all, invstd_all, counts, bn.eps(), bn.momentum(), run.buffer("running_mean"),
                                run.buffer("running_var"), gmean, ginvstd, R, C);
    bn.count_batch(run);
    // PyTorch holds the global statistics as mean and invstd; the variance they stand for is
    // rebuilt from invstd only when someone reads the statistics (Iteration::batchnorm_stats).
    flow[ix(j)] = bn.normalize(run, x, gmean, ginvstd, Tensor(), total);
    if (j == 0) {
      global_mean0 = gmean;
      global_invstd0 = ginvstd;
    }
  });
  for (int j = 0; j < R; ++j) {
    flow_name[ix(j)] = {"activation", layer, true};
    it.bn_device_stats_.push_back({layer, j, mean[ix(j)], var_b[ix(j)], Tensor(), 0.0,
                                   counts[ix(j)]});
  }
  it.bn_device_stats_.push_back({layer, -1, global_mean0, Tensor(), global_invstd0, bn.eps(), total});
  if (describe)
    e.summary = "SyncBatchNorm (what DDP + SyncBatchNorm computes; nn.DataParallel itself does not sync): each replica "
                "computes its chunk's mean and invstd, all-gathers them with the counts, merges them into the "
                "statistics of the whole batch, and normalises with those.";
}

void Iteration::Impl::gather(StageEvent& e) {
  Tensor out0 = flow[0];
  Shape shape = out0.shape();
  shape[0] = input_dev0.dim(0);
  it.output_ = Tensor::empty(shape, out0.dtype(), devs.shared(0));  // [N, K] on device 0
  run_replicas([&](int j) {
    Tensor dst = chunk_of(it.output_, j);
    dst.copy_from(flow[ix(j)]);
  }, static_cast<int64_t>(it.output_.nbytes()));
  for (int j = 1; j < R; ++j) e.bytes_moved += flow[ix(j)].nbytes();
  if (describe)
    e.summary = "The replicas' outputs are concatenated along dim 0 on device 0 (the output_device): " +
                torch_size_str(it.output_.shape()) + ".";
}

void Iteration::Impl::loss(StageEvent& e) {
  if (!it.output_.defined()) it.output_ = flow[0];  // one device: no gather, the output stays where it is
  Device& d0 = devs[0];
  const double start = now();
  loss_tensor = Tensor::empty({}, it.output_.dtype(), devs.shared(0));
  dlogits = Tensor::empty(it.output_.shape(), it.output_.dtype(), devs.shared(0));
  if (it.output_.ndim() != 2)  // every step passes here: the message is built only when thrown
    throw Error("CrossEntropyLoss expects logits [N, classes], got " + shape_str(it.output_.shape()));
  d0.backend().cross_entropy(it.output_, target_dev0, loss_tensor, dlogits, 1.0);
  d0.backend().synchronize();
  busy_start[0] = start;
  busy_end[0] = now();
  it.loss_.reset();  // read from loss_tensor when asked for (Iteration::loss)
  if (describe)
    e.summary = "CrossEntropyLoss (mean over the " + std::to_string(it.output_.dim(0)) +
                " samples, leaving out any whose target is -100, the ignore_index) is computed once, on device 0, "
                "from the gathered output: a 0-dim tensor.";
}

}  // namespace dpv
