// The value snapshot of each stage: what every device holds, why, its memory by kind, its busy span.
// The tensors listed are exactly the ones the iteration and the trainer keep alive on the device,
// each storage once, so the chips the app draws and the memory it reports agree by construction.
#include "engine/backend.h"
#include "engine/error.h"
#include "engine/index.h"
#include "engine/layers/batchnorm.h"
#include "engine/memory_listing.h"
#include "engine/parallel/iteration_impl.h"

namespace dpv {

namespace {

using Kind = MemoryKind;

std::string rows_text(int64_t begin, int64_t n) {
  return n == 1 ? "row " + std::to_string(begin) : "rows " + std::to_string(begin) + "-" + std::to_string(begin + n - 1);
}

}  // namespace

void Iteration::Impl::fill_snapshot(StageEvent& e) const {
  const StageKind kind = e.stage.kind;
  const bool backward_started = kind == StageKind::GradScatter || kind == StageKind::Backward ||
                                kind == StageKind::ReduceGrads || kind == StageKind::Step;
  for (int d = 0; d < devs.size(); ++d) {
    DeviceState s = device_header(d);
    MemoryListing list(s);
    // The order matters: a storage is counted, in its kind, with the first tensor listed on it.
    if (d == 0) list_module_and_batch(list);
    if (d < R) list_replica(list, d, e.stage, backward_started);
    list_batchnorm_stats(list, d);
    list.finish();
    e.devices.push_back(std::move(s));
  }
}

DeviceState Iteration::Impl::device_header(int d) const {
  DeviceState s;
  s.device = d;
  s.label = devs[d].label();
  s.chunk_rows = d < R ? it.chunks_[ix(d)] : 0;
  // Replica 0 is the module itself; the others exist from Replicate until the backward is over.
  const bool copy_alive = d > 0 && d < R && !replicas[ix(d)].params.items().empty();
  s.has_replica = d < R && (d == 0 || copy_alive);
  s.replica_discarded = d > 0 && d < R && multi && graph_freed;
  s.memory_bytes = devs[d].memory().current.load();
  s.memory_peak = devs[d].memory().peak.load();
  s.busy_start = busy_start[ix(d)];
  s.busy_end = busy_end[ix(d)];
  return s;
}

void Iteration::Impl::list_module_and_batch(MemoryListing& list) const {
  const Model& model = tr.model();
  list.add(input_dev0, "inputs", TensorRole::Input, Kind::Batch,
           "The whole batch: `.cuda()` in your code copied it to GPU 0 before model(inputs).", 0);
  list.add(target_dev0, "labels", TensorRole::Target, Kind::Batch,
           "The labels: `.cuda()` copied them to GPU 0, where the loss will be computed.");
  for (const auto& decl : model.parameter_decls())
    list.add_state(decl.name, tr.state().at(decl.name), decl.name, TensorRole::Param, Kind::Parameters,
             "The module's parameter (model.cuda()); replica 0 computes with this very tensor, "
             "optimizer.step() updates it.");
  for (const auto& decl : model.buffer_decls())
    list.add_state(decl.name, tr.state().at(decl.name), decl.name, TensorRole::Buffer, Kind::Parameters,
             "A buffer of the module (model.cuda()); replica 0 updates this very tensor.");
  tr.optimizer().for_each_state_tensor([&](const std::string& state_name, const std::string& name, const Tensor& t) {
    list.add_state(name, t, optimizer_state_label(state_name) + " " + name, TensorRole::Optimizer, Kind::Optimizer,
                   optimizer_class_name(tr.optimizer().settings().kind) + std::string("'s ") + state_name +
                       ": optimizer state, kept on GPU 0 only, from the first step on.");
  });
  for (const auto& [name, g] : tr.grads().items())
    list.add_state(name, g, grads_reduced ? "grad " + name : "grad " + name + " (last step)", TensorRole::Grad, Kind::Gradients,
             grads_reduced ? "The parameter's .grad: the replicas' gradients summed onto GPU 0."
                           : "The parameter's .grad from the last step; this iteration's sum replaces it.");
  list.add(it.output_, "output", TensorRole::Output, Kind::Output,
           multi ? "The replicas' outputs concatenated on GPU 0 (the output device): GPU 0's extra load."
                 : "The model's output; your code holds it in `outputs`.");
  list.add(dlogits, "grad of output", TensorRole::Grad, Kind::Output,
           "d loss / d output, the size of the whole output; freed when the backward is over.");
  list.add(loss_tensor, "loss", TensorRole::Loss, Kind::Output, "The 0-dim loss your code holds in `loss`.");
}

void Iteration::Impl::list_replica(MemoryListing& list, int d, const Stage& stage, bool backward_started) const {
  const Replica& rep = replicas[ix(d)];
  if (d < static_cast<int>(chunk_inputs.size()) && chunk_inputs[ix(d)].defined()) {
    const int64_t begin = chunk_begin[ix(d)];
    const std::string rows = rows_text(begin, it.chunks_[ix(d)]);
    list.add(chunk_inputs[ix(d)], "input chunk " + std::to_string(d), TensorRole::Input, Kind::Batch,
             d == 0 ? "Chunk 0 of the scatter, " + rows + " of the batch: a view of inputs on GPU 0, no copy."
                    : "Chunk " + std::to_string(d) + " of the scatter: " + rows + " of the batch, copied here.",
             begin);
  }
  if (d > 0) {
    for (const auto& [name, t] : rep.params.items())
      list.add_state(name, t, name, TensorRole::Param, Kind::Parameters,
               "Replica " + std::to_string(d) + "'s copy, broadcast from GPU 0 by replicate; freed after backward.");
    for (const auto& [name, t] : rep.buffers.items())
      list.add_state(name, t, name, TensorRole::Buffer, Kind::Parameters,
               "Replica " + std::to_string(d) + "'s copy of a buffer; its updates are thrown away with the replica.");
  }
  list_layer_caches(list, rep);
  list_flow(list, d, stage, backward_started);
  for (const auto& [name, g] : rep.grads.items())
      list.add_state(name, g, "grad " + name, TensorRole::Grad, Kind::Gradients,
               "This replica's gradient from its own chunk; the reduce sums it onto GPU 0.");
}

void Iteration::Impl::list_flow(MemoryListing& list, int d, const Stage& stage, bool backward_started) const {
  // The current activation (or its gradient), listed after what the layers keep.
  const Tensor f = flow_as_seen(d, stage);
  if (f.defined() && stage.kind != StageKind::Scatter)
    list.add(f, flow_name[ix(d)].text(), backward_started ? TensorRole::Grad : TensorRole::Activation, Kind::Activations,
             backward_started ? "The gradient flowing back through this replica's layers."
                              : "What this replica's next layer takes as input.");
}

void Iteration::Impl::list_layer_caches(MemoryListing& list, const Replica& rep) const {
  // What the layers keep for backward, newest last.
  const Model& model = tr.model();
  for (int layer = 0; layer < static_cast<int>(rep.caches.size()); ++layer) {
    const LayerCache& c = rep.caches[ix(layer)];
    const std::string l = std::to_string(layer);
    list.add(c.input, "input of layer " + l, TensorRole::Activation, Kind::Activations,
             "Saved by layer " + l + " for its backward.");
    list.add(c.output, "activation " + l, TensorRole::Activation, Kind::Activations,
             "Output of layer " + l + " on this chunk; kept until backward has used it.");
    list.add(c.aux, "layer " + l + (model.layer(layer).is_batchnorm() ? " saved mean" : " saved columns"),
             TensorRole::Activation, Kind::Activations, "Saved by layer " + l + " for its backward.");
    list.add(c.aux2, "layer " + l + " saved invstd", TensorRole::Activation, Kind::Activations,
             "Saved by layer " + l + " for its backward.");
    list.add(c.var_b, "layer " + l + " saved variance", TensorRole::Activation, Kind::Activations,
             "The variance this chunk was normalised with.");
    list.add(c.relu_output, "activation " + std::to_string(layer + 1), TensorRole::Activation, Kind::Activations,
             "Output of layer " + std::to_string(layer + 1) + " (ReLU), written in the same pass as BatchNorm " +
                 l + "'s; both layers' backward read it.");
  }
}

void Iteration::Impl::list_batchnorm_stats(MemoryListing& list, int d) const {
  // BatchNorm statistics the iteration keeps to report them (most alias what the layers saved).
  for (const auto& st : it.bn_device_stats_) {
    const int on = st.device < 0 ? 0 : st.device;
    if (on != d) continue;
    const std::string l = std::to_string(st.layer);
    list.add(st.mean, "layer " + l + (st.device < 0 ? " global mean" : " chunk mean"), TensorRole::Activation,
             Kind::Activations, "BatchNorm's batch statistics of layer " + l + ".");
    list.add(st.var_b, "layer " + l + " chunk variance", TensorRole::Activation, Kind::Activations,
             "BatchNorm's batch statistics of layer " + l + ".");
    list.add(st.invstd, "layer " + l + " global invstd", TensorRole::Activation, Kind::Activations,
             "SyncBatchNorm's statistics of the whole batch.");
  }
}

Tensor Iteration::Impl::flow_as_seen(int d, const Stage& stage) const {
  const Tensor& f = flow[ix(d)];
  if (!f.defined() || stage.layer < 0 || d >= R) return f;
  const Replica& rep = replicas[ix(d)];
  const Model& model = tr.model();
  const Layer& layer = model.layer(stage.layer);
  if (stage.kind == StageKind::Forward && layer.is_batchnorm()) {
    const LayerCache& c = rep.caches[ix(stage.layer)];
    if (!c.relu_fused) return f;
    const std::string prefix = model.layer_prefix(stage.layer);
    return static_cast<const BatchNorm&>(layer).output_before_relu(rep.device->backend(), c,
                                                                   rep.params.at(prefix + "weight"),
                                                                   rep.params.at(prefix + "bias"));
  }
  if (stage.kind == StageKind::Backward && layer.is_relu() && stage.layer > 0) {
    const LayerCache& c = rep.caches[ix(stage.layer - 1)];
    if (!c.relu_fused) return f;
    Tensor g = Tensor::empty(f.shape(), f.dtype(), f.device_ptr());
    rep.device->backend().relu_backward(c.relu_output, f, g);
    return g;
  }
  return f;
}

std::vector<DeviceState> Iteration::devices_now() const {
  StageEvent e;
  e.stage = next_ > 0 ? (*plan_)[ix(next_ - 1)] : Stage{StageKind::Scatter, -1, {}};
  impl_->fill_snapshot(e);
  return e.devices;
}

}  // namespace dpv
