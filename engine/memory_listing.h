#pragma once
// One device's snapshot listing (engine/observer.h DeviceState): the tensors a run keeps alive on
// the device, each storage once (a view counts with what it views), each counted in one part of
// the device's memory (MemoryBreakdown) by its MemoryKind. DataParallel's and DDP's snapshots
// both list through it, so their memory parts are counted the same way.
#include <string>
#include <vector>

#include "engine/observer.h"
#include "engine/tensor.h"

namespace dpv {

class MemoryListing {
 public:
  // `state.device` and `state.memory_bytes` must be set: tensors on other devices are skipped, and
  // finish() puts what the counter holds beyond the listed tensors into memory.other.
  // `copy_values` false: a memory account only, no tensor's values are read (TensorInfo::head empty).
  explicit MemoryListing(DeviceState& state, bool copy_values = true) : s_(state), copy_values_(copy_values) {}

  // `first_row`: for a piece of the batch, its first row in the batch (then a view of a listed
  // tensor is shown, not counted). `copy_values`: false for a tensor another thread may be writing
  // now (a DDP bucket under its all-reduce); its TensorInfo then has no values.
  void add(const Tensor& t, const std::string& name, TensorRole role, MemoryKind kind, const std::string& why,
           int64_t first_row = -1, bool copy_values = true);
  // add() for a tensor of a state-dict entry (the parameter, buffer, .grad or momentum of `entry`):
  // its TensorInfo says which (state_entry).
  void add_state(const std::string& entry, const Tensor& t, const std::string& name, TensorRole role, MemoryKind kind,
                 const std::string& why);
  void finish() { s_.memory.other = s_.memory_bytes - counted_; }

 private:
  void push(const Tensor& t, const std::string& name, TensorRole role, MemoryKind kind, const std::string& why,
            int64_t first_row, bool view, bool copy_values);
  DeviceState& s_;
  std::vector<Tensor> seen_;
  int64_t counted_ = 0;
  bool copy_values_ = true;
};

// The part of `m` that `kind` counts in.
int64_t& memory_part(MemoryBreakdown& m, MemoryKind kind);

}  // namespace dpv
