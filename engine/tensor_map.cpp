#include "engine/tensor_map.h"

#include "engine/error.h"

namespace dpv {

const Tensor* TensorMap::find(const std::string& name) const {
  for (const auto& [n, t] : items_)
    if (n == name) return &t;
  return nullptr;
}

Tensor* TensorMap::find(const std::string& name) {
  for (auto& [n, t] : items_)
    if (n == name) return &t;
  return nullptr;
}

const Tensor& TensorMap::at(const std::string& name, std::string_view what) const {
  if (const Tensor* t = find(name)) return *t;
  throw Error("missing tensor '" + name + "' in " + std::string(what), ErrorClass::KeyError);
}

Tensor& TensorMap::at(const std::string& name, std::string_view what) {
  if (Tensor* t = find(name)) return *t;
  throw Error("missing tensor '" + name + "' in " + std::string(what), ErrorClass::KeyError);
}

void TensorMap::set(const std::string& name, const Tensor& t) {
  if (Tensor* existing = find(name))
    *existing = t;
  else
    items_.emplace_back(name, t);
}

void TensorMap::set(const std::string& name, Tensor&& t) {
  if (Tensor* existing = find(name))
    *existing = std::move(t);
  else
    items_.emplace_back(name, std::move(t));
}

std::vector<std::string> TensorMap::names() const {
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& item : items_) out.push_back(item.first);
  return out;
}

}  // namespace dpv
