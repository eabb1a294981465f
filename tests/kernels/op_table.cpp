// The op table's plumbing: case values, named tensors, one run of an entry on a backend, and the
// table itself assembled from the entry files.
#include "tests/kernels/op_table.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace dpv::test {

int64_t OpCase::size(const std::string& name) const {
  const double v = value(name);
  if (v != std::floor(v) || v < 0) throw std::logic_error("case " + label + ": size " + name + " is not a count");
  return static_cast<int64_t>(v);
}

double OpCase::value(const std::string& name) const {
  const auto it = values.find(name);
  if (it == values.end()) throw std::logic_error("case " + label + " does not set " + name);
  return it->second;
}

double OpCase::value_or(const std::string& name, double fallback) const {
  const auto it = values.find(name);
  return it == values.end() ? fallback : it->second;
}

bool OpCase::flag(const std::string& name) const { return value_or(name, 0) != 0; }

Tensor& OpTensors::at(const std::string& name) {
  const auto it = named_.find(name);
  if (it == named_.end()) throw std::logic_error("the op's tensors have no '" + name + "'");
  return it->second;
}

const Tensor& OpTensors::at(const std::string& name) const { return const_cast<OpTensors*>(this)->at(name); }

OpTensors OpTensors::copied_to(const std::shared_ptr<Device>& device) const {
  OpTensors out;
  for (const auto& [name, t] : named_) out.add(name, t.defined() ? t.to(device) : Tensor());
  return out;
}

OpValues run_op(const OpEntry& entry, const OpCase& c, const OpTensors& inputs, Backend& backend,
                const std::shared_ptr<Device>& device) {
  OpTensors on_device = inputs.copied_to(device);
  entry.call(backend, c, on_device);
  backend.synchronize();
  OpValues out;
  for (const std::string& name : entry.outputs) {
    const Tensor& t = on_device.at(name);
    out[name] = t.defined() ? t.to_doubles() : std::vector<double>{};  // an optional output left out
  }
  return out;
}

Tensor uniform_tensor(const Shape& shape, DType dt, Rng& rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (double& x : v) x = dist(rng);
  return Tensor::from_doubles(shape, dt, v);
}

Tensor nan_tensor(const Shape& shape, DType dt) {
  return Tensor::full(shape, dt, std::numeric_limits<double>::quiet_NaN());
}

Backend::ConvGeometry conv_geometry(const OpCase& c) {
  Backend::ConvGeometry g{c.size("N"), c.size("C"), c.size("H"), c.size("W"), c.size("kh"),
                          c.size("kw"), c.size("stride"), c.size("pad"), 0, 0};
  g.OH = (g.H + 2 * g.pad - g.kh) / g.stride + 1;
  g.OW = (g.W + 2 * g.pad - g.kw) / g.stride + 1;
  return g;
}

const std::vector<OpEntry>& op_table() {
  static const std::vector<OpEntry> table = [] {
    std::vector<OpEntry> all;
    for (auto part : {dense_op_entries, conv_op_entries, norm_op_entries, loss_op_entries})
      for (OpEntry& e : part()) all.push_back(std::move(e));
    return all;
  }();
  return table;
}

}  // namespace dpv::test
