#pragma once
// A stand-in for the NCCL process group on machines without a GPU: it wraps a CPU group (Gloo or
// in-process) and rejects every tensor in host memory with the NCCL group's own check and message
// (require_device_tensor, engine/process_groups/comm_control.h), then forwards the call. A caller
// that would hand NCCL host tensors (`dpv bench allreduce`'s per-rank times once did) fails here
// on the CPU; tensors on a simulated CPU device (cpu:1) stand for the rank's GPU and pass.
#include <memory>
#include <string>
#include <vector>

#include "engine/process_groups/comm_control.h"
#include "engine/process_groups/process_group.h"

namespace dpv::testing {

class DeviceOnlyGroup final : public ProcessGroup {
 public:
  explicit DeviceOnlyGroup(ProcessGroup& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend() const override { return inner_.backend(); }

  CollectiveReport all_reduce_sum(Tensor& buf, std::vector<RingStep>* steps) override {
    require_device_tensor(buf, "all_reduce");
    return inner_.all_reduce_sum(buf, steps);
  }
  CollectiveReport broadcast(Tensor& buf, int root) override {
    require_device_tensor(buf, "broadcast");
    return inner_.broadcast(buf, root);
  }
  CollectiveReport reduce_scatter_sum(const Tensor& in, Tensor& out, std::vector<RingStep>* steps) override {
    require_device_tensor(in, "reduce_scatter");
    require_device_tensor(out, "reduce_scatter");
    return inner_.reduce_scatter_sum(in, out, steps);
  }
  CollectiveReport all_gather(const Tensor& in, Tensor& out, std::vector<RingStep>* steps) override {
    require_device_tensor(in, "all_gather");
    require_device_tensor(out, "all_gather");
    return inner_.all_gather(in, out, steps);
  }
  void barrier() override { inner_.barrier(); }
  // As the NCCL group: no started all-reduces (the default's nullptr), so DDP uses its comm thread.

 private:
  ProcessGroup& inner_;
};

}  // namespace dpv::testing
