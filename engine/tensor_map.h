#pragma once
// Named tensors in insertion order: state dicts ("0.weight", "1.running_mean", ...), gradients,
// and the contents of safetensors files.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace dpv {

class TensorMap {
 public:
  using Item = std::pair<std::string, Tensor>;
  const Tensor* find(const std::string& name) const;
  Tensor* find(const std::string& name);
  // Throws dpv::Error "missing tensor 'name' in <what>" when absent (`what` is a view: a
  // lookup that succeeds, as every lookup in a training step does, builds nothing).
  const Tensor& at(const std::string& name, std::string_view what = "the state dict") const;
  Tensor& at(const std::string& name, std::string_view what = "the state dict");
  // Replaces or appends. Replacing copies the handle into the existing entry, which reuses its
  // shape's memory: a training step re-pointing every gradient allocates nothing here.
  void set(const std::string& name, const Tensor& t);
  void set(const std::string& name, Tensor&& t);
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const std::vector<Item>& items() const { return items_; }
  std::vector<Item>& items() { return items_; }
  std::vector<std::string> names() const;

 private:
  std::vector<Item> items_;
};

}  // namespace dpv
