#include "engine/observer.h"

namespace dpv {

namespace {

struct StageNames {
  const char* id;
  const char* title;
};

// No default: a new StageKind without names is a compile warning (-Wswitch), not a silent "?".
StageNames names_of(StageKind k) {
  switch (k) {
    case StageKind::Scatter: return {"scatter", "Scatter"};
    case StageKind::Replicate: return {"replicate", "Replicate"};
    case StageKind::Forward: return {"forward", "Forward"};
    case StageKind::Gather: return {"gather", "Gather"};
    case StageKind::Loss: return {"loss", "Loss"};
    case StageKind::GradScatter: return {"grad_scatter", "Grad scatter"};
    case StageKind::Backward: return {"backward", "Backward"};
    case StageKind::ReduceGrads: return {"reduce_grads", "Reduce grads"};
    case StageKind::Step: return {"step", "Step"};
    case StageKind::Construct: return {"construct", "Construct"};
    case StageKind::Sample: return {"sample", "Sample"};
    case StageKind::BroadcastBuffers: return {"broadcast_buffers", "Broadcast buffers"};
    case StageKind::Finalize: return {"finalize", "Finalize"};
    case StageKind::GatherParams: return {"gather_params", "All-gather params"};
    case StageKind::FreeParams: return {"free_params", "Free params"};
    case StageKind::ReduceScatter: return {"reduce_scatter", "Reduce-scatter"};
    case StageKind::BroadcastParams: return {"broadcast_params", "Broadcast params"};
  }
  return {"?", "?"};
}

}  // namespace

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Batch: return "batch";
    case MemoryKind::Parameters: return "parameters";
    case MemoryKind::Gradients: return "gradients";
    case MemoryKind::Activations: return "activations";
    case MemoryKind::Optimizer: return "optimizer state";
    case MemoryKind::Output: return "gathered output";
    case MemoryKind::Buckets: return "DDP buckets";
    case MemoryKind::Gathered: return "gathered parameters";
  }
  return "?";
}

const char* tensor_role_name(TensorRole role) {
  switch (role) {
    case TensorRole::Input: return "input";
    case TensorRole::Target: return "target";
    case TensorRole::Param: return "param";
    case TensorRole::Buffer: return "buffer";
    case TensorRole::Activation: return "activation";
    case TensorRole::Grad: return "grad";
    case TensorRole::Output: return "output";
    case TensorRole::Loss: return "loss";
    case TensorRole::Optimizer: return "optimizer";
  }
  return "?";
}

const char* grad_state_name(GradState s) {
  switch (s) {
    case GradState::None: return "none";
    case GradState::Local: return "local";
    case GradState::Averaged: return "averaged";
  }
  return "?";
}

const char* stage_kind_name(StageKind k) { return names_of(k).id; }
const char* stage_kind_title(StageKind k) { return names_of(k).title; }

}  // namespace dpv
