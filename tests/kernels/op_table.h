#pragma once
// One table of the Backend's operations (engine/backend.h), run against every backend there is
// (op_table_test.cpp): the CPU backend always, the CUDA backend where a GPU exists, and the two
// against each other on the same inputs. Each entry says how to make an op's inputs for a case
// (a shape, its flags and scalars), a dtype and a seed, how to call the op on a Backend, and an
// independent reference: plain loops in double precision written here, not the CPU backend's
// code, so a bug shared by both backends (they share kernels/math) still shows.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/tensor.h"

namespace dpv::test {

using Rng = std::mt19937_64;

// One shape an op is tried at, with the flags and scalars of the call: sizes use backend.h's
// dimension letters ("N", "C", "S", "rows", ...), flags are 0 or 1.
struct OpCase {
  std::string label;                      // names the case in a failure: "S1", "trans_a_b", "nan"
  std::map<std::string, double> values;   // sizes, flags and scalars by name; "large": millions of
                                          // elements (DPV_OP_TABLE_SKIP_LARGE=1 leaves it out)

  int64_t size(const std::string& name) const;   // a size the case must set (throws naming it)
  double value(const std::string& name) const;   // a scalar the case must set
  double value_or(const std::string& name, double fallback) const;
  bool flag(const std::string& name) const;      // false when the case leaves it out
};

// The tensors of one call by parameter name: the inputs and the outputs' starting contents (NaN
// where the op must overwrite them, random where it accumulates into them). An undefined tensor
// stands for an optional argument left out (running statistics, BatchNorm without them).
class OpTensors {
 public:
  void add(const std::string& name, Tensor t) { named_[name] = std::move(t); }
  Tensor& at(const std::string& name);              // throws naming the tensor when absent
  const Tensor& at(const std::string& name) const;
  std::vector<double> values(const std::string& name) const { return at(name).to_doubles(); }
  // Copies of every defined tensor on `device` (null: the host), so a call on them leaves these
  // untouched for the reference.
  OpTensors copied_to(const std::shared_ptr<Device>& device) const;

 private:
  std::map<std::string, Tensor> named_;
};

// Expected or measured outputs, by name, as doubles.
using OpValues = std::map<std::string, std::vector<double>>;

// Normwise relative tolerance per dtype (see close() in kernel_test_util.h): against the double
// reference, a float64 result may differ by summation order, a float32 one by its rounding.
struct Tolerance {
  double float32 = 0;
  double float64 = 0;
  double of(DType dt) const { return dt == DType::Float64 ? float64 : float32; }
};
// The common ones: one rounding per element; a sum over a reduction axis.
inline constexpr Tolerance kElementwise{2e-6, 1e-14};
inline constexpr Tolerance kReduction{2e-5, 1e-12};
inline constexpr Tolerance kExact{0, 0};

struct OpEntry {
  std::string name;                  // the Backend method (several entries may call one method)
  std::vector<std::string> outputs;  // the tensors compared after the call
  Tolerance tolerance;
  std::vector<OpCase> cases;
  // Host tensors for a case, a dtype and a generator seeded by the test.
  std::function<OpTensors(const OpCase&, DType, Rng&)> make;
  // The op on `backend`, on copies of make's tensors on that backend's device.
  std::function<void(Backend& backend, const OpCase&, OpTensors&)> call;
  // The outputs in double precision from make's host tensors, written independently of the backends.
  std::function<OpValues(const OpCase&, const OpTensors&)> reference;
};

// Every entry: the dense, convolution, BatchNorm, loss and optimizer ops.
const std::vector<OpEntry>& op_table();
std::vector<OpEntry> dense_op_entries();   // op_table_dense.cpp
std::vector<OpEntry> conv_op_entries();    // op_table_conv.cpp
std::vector<OpEntry> norm_op_entries();    // op_table_norm.cpp
std::vector<OpEntry> loss_op_entries();    // op_table_loss.cpp: cross-entropy and SGD

// Runs one case of an entry on a backend whose tensors live on `device` (null: the host) and
// returns the entry's outputs.
OpValues run_op(const OpEntry& entry, const OpCase& c, const OpTensors& inputs, Backend& backend,
                const std::shared_ptr<Device>& device);

// --- helpers for the entries

// Host tensor of uniform values in [lo, hi), stored in `dt` (the reference reads the stored values).
Tensor uniform_tensor(const Shape& shape, DType dt, Rng& rng, double lo = -1, double hi = 1);
// Host tensor every element of which is NaN: an output the op must overwrite.
Tensor nan_tensor(const Shape& shape, DType dt);
// The convolution of a case: sizes N, C, H, W, kh, kw, stride, pad; OH and OW worked out.
Backend::ConvGeometry conv_geometry(const OpCase& c);
// Element (n, c, s) of a [N, C, S] tensor stored flat.
inline size_t at_ncs(int64_t n, int64_t c, int64_t s, int64_t C, int64_t S) {
  return static_cast<size_t>((n * C + c) * S + s);
}

}  // namespace dpv::test
