// The value snapshot of each stage: what every device holds, its memory, its busy span.
#include "engine/error.h"
#include "engine/index.h"
#include "engine/parallel/iteration_impl.h"

namespace dpv {

namespace {
constexpr size_t kHeadValues = 6;

TensorInfo info(const std::string& name, TensorRole role, const Tensor& t) {
  TensorInfo i;
  i.name = name;
  i.role = role;
  i.shape = t.shape();
  i.dtype = t.dtype();
  i.device = t.device_index();
  i.bytes = t.nbytes();
  i.head = t.to_doubles(kHeadValues);
  return i;
}
}  // namespace

void Iteration::Impl::fill_snapshot(StageEvent& e) const {
  const StageKind kind = e.stage.kind;
  const bool after_replicate = kind != StageKind::Scatter;
  const bool backward_started = kind == StageKind::GradScatter || kind == StageKind::Backward ||
                                kind == StageKind::ReduceGrads || kind == StageKind::Step;
  for (int d = 0; d < devs.size(); ++d) {
    DeviceState s;
    s.device = d;
    s.label = devs[d].label();
    s.chunk_rows = d < R ? it.chunks_[ix(d)] : 0;
    // Replicas exist from Replicate until their gradients are reduced; replica 0 is the module itself.
    s.has_replica = d < R && (d == 0 || (multi && after_replicate && kind != StageKind::Step));
    s.memory_bytes = devs[d].memory().current.load();
    s.memory_peak = devs[d].memory().peak.load();
    s.busy_start = busy_start[ix(d)];
    s.busy_end = busy_end[ix(d)];
    if (d < R) {
      const Replica& rep = replicas[ix(d)];
      if (d < static_cast<int>(chunk_inputs.size()) && chunk_inputs[ix(d)].defined())
        s.tensors.push_back(info("input chunk", TensorRole::Input, chunk_inputs[ix(d)]));
      if (s.has_replica)
        for (const auto& [name, t] : rep.params.items()) s.tensors.push_back(info(name, TensorRole::Param, t));
      if (s.has_replica)
        for (const auto& [name, t] : rep.buffers.items())
          if (name.find("running") != std::string::npos) s.tensors.push_back(info(name, TensorRole::Buffer, t));
      const Tensor& f = flow[ix(d)];
      if (f.defined() && kind != StageKind::Scatter && kind != StageKind::ReduceGrads && kind != StageKind::Step)
        s.tensors.push_back(info(flow_name[ix(d)], backward_started ? TensorRole::Grad : TensorRole::Activation, f));
      if (backward_started && kind != StageKind::Step && !(grads_reduced && d == 0))
        for (const auto& [name, g] : rep.grads.items()) s.tensors.push_back(info("grad " + name, TensorRole::Grad, g));
    }
    if (d == 0) {
      if (!s.has_replica || kind == StageKind::Step)
        for (const auto& [name, t] : tr.state().items())
          if (name.find("num_batches") == std::string::npos) s.tensors.push_back(info(name, TensorRole::Param, t));
      if (it.output_.defined() && multi) s.tensors.push_back(info("output", TensorRole::Output, it.output_));
      if (kind == StageKind::Loss || backward_started) {
        s.tensors.push_back(info("target", TensorRole::Target, target_dev0));
        if (loss_tensor.defined()) s.tensors.push_back(info("loss", TensorRole::Loss, loss_tensor));
      }
      if (grads_reduced || kind == StageKind::Step)
        for (const auto& [name, g] : tr.grads().items()) s.tensors.push_back(info("grad " + name, TensorRole::Grad, g));
    }
    e.devices.push_back(std::move(s));
  }
}

}  // namespace dpv
