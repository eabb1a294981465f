// One device's snapshot listing (see memory_listing.h).
#include "engine/memory_listing.h"

#include "engine/index.h"

namespace dpv {

int64_t& memory_part(MemoryBreakdown& m, MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Batch: return m.batch;
    case MemoryKind::Parameters: return m.parameters;
    case MemoryKind::Gradients: return m.gradients;
    case MemoryKind::Activations: return m.activations;
    case MemoryKind::Optimizer: return m.optimizer;
    case MemoryKind::Output: return m.output;
    case MemoryKind::Buckets: return m.buckets;
    case MemoryKind::Gathered: return m.gathered;
  }
  return m.other;
}

void MemoryListing::add(const Tensor& t, const std::string& name, TensorRole role, MemoryKind kind,
                        const std::string& why, int64_t first_row, bool copy_values) {
  if (!t.defined() || t.device_index() != s_.device) return;
  for (const Tensor& seen : seen_)
    if (seen.shares_storage_with(t)) {
      if (first_row >= 0) push(t, name, role, kind, why, first_row, true, copy_values);  // shown, not counted
      return;
    }
  seen_.push_back(t);
  counted_ += static_cast<int64_t>(t.nbytes());
  memory_part(s_.memory, kind) += static_cast<int64_t>(t.nbytes());
  push(t, name, role, kind, why, first_row, false, copy_values);
}

void MemoryListing::add_state(const std::string& entry, const Tensor& t, const std::string& name, TensorRole role,
                              MemoryKind kind, const std::string& why) {
  const size_t before = s_.tensors.size();
  add(t, name, role, kind, why);
  if (s_.tensors.size() > before) s_.tensors.back().state_entry = entry;  // add lists one tensor at most
}

void MemoryListing::push(const Tensor& t, const std::string& name, TensorRole role, MemoryKind kind,
                         const std::string& why, int64_t first_row, bool view, bool copy_values) {
  TensorInfo i;
  i.name = name;
  i.role = role;
  i.shape = t.shape();
  i.dtype = t.dtype();
  i.device = t.device_index();
  i.bytes = t.nbytes();
  if (copy_values && copy_values_) i.head = t.to_doubles(ix(t.numel()) <= kSnapshotAllValues ? ix(t.numel()) : kSnapshotHeadValues);
  i.first_row = first_row;
  i.why = why;
  i.memory = kind;
  i.view = view;
  s_.tensors.push_back(std::move(i));
}

}  // namespace dpv
