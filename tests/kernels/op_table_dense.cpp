// The op table's dense entries: fill, GEMM (every transpose, a Linear layer's size, inner = 0),
// channel bias and sums, in-place add / addcmul / scale, and ReLU both ways (NaN, empty, and a
// tensor large enough that every GPU thread of a grid-stride loop takes a second trip).
#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/kernels/op_table.h"

namespace dpv::test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// 2^23 + 17 elements: more than a grid of (multiprocessors x 64) blocks of 256 threads on any GPU
// up to 500 multiprocessors.
constexpr double kGridStrideElements = (1 << 23) + 17;

Shape rows_cols(const OpCase& c) { return {c.size("rows"), c.size("cols")}; }

// Random values with NaN of both signs and zeros of both signs at fixed places: relu must pass a
// NaN through (PyTorch's relu(nan) is nan) and its backward passes dy where the output is NaN.
Tensor with_nans_and_zeros(const Shape& shape, DType dt, Rng& rng) {
  std::vector<double> v = uniform_tensor(shape, DType::Float64, rng).to_doubles();
  for (size_t i = 0; i < v.size(); ++i) {
    if (i % 5 == 0) v[i] = kNaN;
    if (i % 7 == 3) v[i] = -kNaN;
    if (i % 11 == 1) v[i] = (i % 2 == 0) ? 0.0 : -0.0;
  }
  return Tensor::from_doubles(shape, dt, v);
}

double reference_relu(double x) { return std::isnan(x) ? x : std::max(x, 0.0); }

OpEntry fill_entry() {
  return {
      .name = "fill",
      .outputs = {"t"},
      .tolerance = kExact,
      .cases = {{"float", {{"n", 3000}, {"value", 2.5}}}, {"int64", {{"n", 77}, {"value", 7}, {"int64", 1}}}},
      .make = [](const OpCase& c, DType dt, Rng&) {
        OpTensors t;
        const Shape shape{c.size("n")};
        t.add("t", c.flag("int64") ? Tensor::full(shape, DType::Int64, -1) : nan_tensor(shape, dt));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) { be.fill(t.at("t"), c.value("value")); },
      .reference = [](const OpCase& c, const OpTensors&) {
        return OpValues{{"t", std::vector<double>(static_cast<size_t>(c.size("n")), c.value("value"))}};
      },
  };
}

OpCase gemm_case(std::string label, int64_t rows, int64_t cols, int64_t inner, bool ta, bool tb, double alpha,
                 double beta, bool c_starts_nan) {
  return {std::move(label),
          {{"rows", rows}, {"cols", cols}, {"inner", inner}, {"trans_a", ta}, {"trans_b", tb}, {"alpha", alpha},
           {"beta", beta}, {"c_starts_nan", c_starts_nan}}};
}

OpEntry gemm_entry() {
  return {
      .name = "gemm",
      .outputs = {"c"},
      .tolerance = kReduction,
      .cases = {gemm_case("a_b", 37, 53, 129, false, false, 0.75, 0.5, false),
                gemm_case("a_bT", 37, 53, 129, false, true, 0.75, 0.5, false),
                gemm_case("aT_b", 37, 53, 129, true, false, 0.75, 0.5, false),
                gemm_case("aT_bT", 37, 53, 129, true, true, 0.75, 0.5, false),
                // A Linear layer's forward, x [rows, inner] @ W^T with W [cols, inner]; beta = 0
                // must not read C (BLAS's rule), so NaN there must vanish.
                gemm_case("linear_forward", 256, 384, 512, false, true, 1.0, 0.0, true),
                gemm_case("inner0_beta0", 3, 4, 0, false, false, 1.0, 0.0, true),
                gemm_case("inner0_beta_half", 3, 4, 0, false, false, 1.0, 0.5, false)},
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        const int64_t rows = c.size("rows"), cols = c.size("cols"), inner = c.size("inner");
        OpTensors t;
        t.add("a", uniform_tensor(c.flag("trans_a") ? Shape{inner, rows} : Shape{rows, inner}, dt, rng));
        t.add("b", uniform_tensor(c.flag("trans_b") ? Shape{cols, inner} : Shape{inner, cols}, dt, rng));
        t.add("c", c.flag("c_starts_nan") ? nan_tensor({rows, cols}, dt) : uniform_tensor({rows, cols}, dt, rng));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) {
        be.gemm(c.flag("trans_a"), c.flag("trans_b"), c.size("rows"), c.size("cols"), c.size("inner"),
                c.value("alpha"), t.at("a"), t.at("b"), c.value("beta"), t.at("c"));
      },
      .reference = [](const OpCase& c, const OpTensors& in) {
        const int64_t rows = c.size("rows"), cols = c.size("cols"), inner = c.size("inner");
        const bool ta = c.flag("trans_a"), tb = c.flag("trans_b");
        const double alpha = c.value("alpha"), beta = c.value("beta");
        const std::vector<double> a = in.values("a"), b = in.values("b");
        std::vector<double> out = in.values("c");  // [rows, cols]
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j) {
            double dot = 0;
            for (int64_t k = 0; k < inner; ++k) {
              const double aik = a[static_cast<size_t>(ta ? k * rows + i : i * inner + k)];
              const double bkj = b[static_cast<size_t>(tb ? j * inner + k : k * cols + j)];
              dot += aik * bkj;
            }
            double& cij = out[static_cast<size_t>(i * cols + j)];
            cij = alpha * dot + (beta == 0 ? 0.0 : beta * cij);
          }
        return OpValues{{"c", out}};
      },
  };
}

const std::vector<OpCase> kChannelCases{{"S1", {{"N", 19}, {"C", 70}, {"S", 1}}},
                                        {"S49", {{"N", 19}, {"C", 70}, {"S", 49}}}};

Shape ncs(const OpCase& c) { return {c.size("N"), c.size("C"), c.size("S")}; }

OpEntry add_channel_bias_entry() {
  return {
      .name = "add_channel_bias",
      .outputs = {"y"},
      .tolerance = kElementwise,
      .cases = kChannelCases,
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        OpTensors t;
        t.add("y", uniform_tensor(ncs(c), dt, rng));
        t.add("bias", uniform_tensor({c.size("C")}, dt, rng));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) {
        be.add_channel_bias(t.at("y"), t.at("bias"), c.size("N"), c.size("C"), c.size("S"));
      },
      .reference = [](const OpCase& c, const OpTensors& in) {
        const int64_t N = c.size("N"), C = c.size("C"), S = c.size("S");
        std::vector<double> y = in.values("y");
        const std::vector<double> bias = in.values("bias");
        for (int64_t n = 0; n < N; ++n)
          for (int64_t ch = 0; ch < C; ++ch)
            for (int64_t s = 0; s < S; ++s) y[at_ncs(n, ch, s, C, S)] += bias[static_cast<size_t>(ch)];
        return OpValues{{"y", y}};
      },
  };
}

OpEntry sum_channels_entry() {
  std::vector<OpCase> cases;
  for (const OpCase& shape : kChannelCases)
    for (bool accumulate : {false, true}) {
      OpCase c = shape;
      c.label += accumulate ? "_accumulate" : "_overwrite";
      c.values["accumulate"] = accumulate ? 1 : 0;
      cases.push_back(c);
    }
  return {
      .name = "sum_channels",
      .outputs = {"out"},
      .tolerance = kReduction,
      .cases = cases,
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        OpTensors t;
        t.add("dy", uniform_tensor(ncs(c), dt, rng));
        t.add("out", c.flag("accumulate") ? uniform_tensor({c.size("C")}, dt, rng) : nan_tensor({c.size("C")}, dt));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) {
        be.sum_channels(t.at("dy"), t.at("out"), c.size("N"), c.size("C"), c.size("S"), c.flag("accumulate"));
      },
      .reference = [](const OpCase& c, const OpTensors& in) {
        const int64_t N = c.size("N"), C = c.size("C"), S = c.size("S");
        const std::vector<double> dy = in.values("dy");
        std::vector<double> out = in.values("out");
        for (int64_t ch = 0; ch < C; ++ch) {
          double sum = 0;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t s = 0; s < S; ++s) sum += dy[at_ncs(n, ch, s, C, S)];
          double& o = out[static_cast<size_t>(ch)];
          o = c.flag("accumulate") ? o + sum : sum;
        }
        return OpValues{{"out", out}};
      },
  };
}

// add_inplace and addcmul_inplace on dst [n]; "offset" runs the op on the view from that element
// on (one element in: not 16-byte aligned, the kernels' scalar path), leaving the head alone.
Tensor view_from(Tensor& t, const OpCase& c) {
  const int64_t offset = static_cast<int64_t>(c.value_or("offset", 0));
  return t.slice0(offset, t.dim(0));
}

OpEntry add_inplace_entry() {
  return {
      .name = "add_inplace",
      .outputs = {"dst"},
      .tolerance = kElementwise,
      // 1003 elements: the vectorised float32 path plus its 3-element tail.
      .cases = {{"n1003", {{"n", 1003}}},
                {"view_offset1", {{"n", 1003}, {"offset", 1}}},
                {"int64", {{"n", 77}, {"int64", 1}}}},
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        OpTensors t;
        const Shape shape{c.size("n")};
        if (c.flag("int64")) {  // num_batches_tracked
          std::uniform_int_distribution<int64_t> pick(-1000, 1000);
          for (const char* name : {"dst", "src"}) {
            std::vector<int64_t> v(static_cast<size_t>(shape[0]));
            for (int64_t& x : v) x = pick(rng);
            t.add(name, Tensor::from_int64(shape, v));
          }
          return t;
        }
        t.add("dst", uniform_tensor(shape, dt, rng));
        t.add("src", uniform_tensor(shape, dt, rng));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) {
        Tensor dst = view_from(t.at("dst"), c);
        be.add_inplace(dst, view_from(t.at("src"), c));
      },
      .reference = [](const OpCase& c, const OpTensors& in) {
        std::vector<double> dst = in.values("dst");
        const std::vector<double> src = in.values("src");
        for (size_t i = static_cast<size_t>(c.value_or("offset", 0)); i < dst.size(); ++i) dst[i] += src[i];
        return OpValues{{"dst", dst}};
      },
  };
}

OpEntry addcmul_inplace_entry() {
  return {
      .name = "addcmul_inplace",
      .outputs = {"dst"},
      .tolerance = kElementwise,
      .cases = {{"n1003", {{"n", 1003}}}, {"empty", {{"n", 0}}}},
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        OpTensors t;
        for (const char* name : {"dst", "a", "b"}) t.add(name, uniform_tensor({c.size("n")}, dt, rng));
        return t;
      },
      .call = [](Backend& be, const OpCase&, OpTensors& t) { be.addcmul_inplace(t.at("dst"), t.at("a"), t.at("b")); },
      .reference = [](const OpCase&, const OpTensors& in) {
        std::vector<double> dst = in.values("dst");
        const std::vector<double> a = in.values("a"), b = in.values("b");
        for (size_t i = 0; i < dst.size(); ++i) dst[i] += a[i] * b[i];
        return OpValues{{"dst", dst}};
      },
  };
}

OpEntry scale_inplace_entry() {
  return {
      .name = "scale_inplace",
      .outputs = {"dst"},
      .tolerance = kElementwise,
      // alpha = 0 writes zeros over anything, NaN included (BLAS's beta = 0 rule: a GEMM with
      // inner = 0 relies on it).
      .cases = {{"n1003", {{"rows", 1}, {"cols", 1003}, {"alpha", -0.3}}},
                {"alpha0_over_nan", {{"rows", 1}, {"cols", 33}, {"alpha", 0}, {"starts_nan", 1}}},
                {"empty", {{"rows", 0}, {"cols", 5}, {"alpha", 0}}}},
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        OpTensors t;
        t.add("dst", c.flag("starts_nan") ? nan_tensor(rows_cols(c), dt) : uniform_tensor(rows_cols(c), dt, rng));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) { be.scale_inplace(t.at("dst"), c.value("alpha")); },
      .reference = [](const OpCase& c, const OpTensors& in) {
        std::vector<double> dst = in.values("dst");
        const double alpha = c.value("alpha");
        for (double& x : dst) x = alpha == 0 ? 0.0 : x * alpha;
        return OpValues{{"dst", dst}};
      },
  };
}

OpEntry relu_forward_entry() {
  return {
      .name = "relu_forward",
      .outputs = {"y"},
      .tolerance = kExact,
      .cases = {{"64x33", {{"rows", 64}, {"cols", 33}}},
                {"nan", {{"rows", 3}, {"cols", 37}, {"nan", 1}}},
                {"grid_stride", {{"rows", 1}, {"cols", kGridStrideElements}, {"large", 1}}},
                {"empty", {{"rows", 0}, {"cols", 5}}}},
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        OpTensors t;
        t.add("x", c.flag("nan") ? with_nans_and_zeros(rows_cols(c), dt, rng) : uniform_tensor(rows_cols(c), dt, rng));
        t.add("y", nan_tensor(rows_cols(c), dt));
        return t;
      },
      .call = [](Backend& be, const OpCase&, OpTensors& t) { be.relu_forward(t.at("x"), t.at("y")); },
      .reference = [](const OpCase&, const OpTensors& in) {
        std::vector<double> y = in.values("x");
        for (double& v : y) v = reference_relu(v);
        return OpValues{{"y", y}};
      },
  };
}

OpEntry relu_backward_entry() {
  return {
      .name = "relu_backward",
      .outputs = {"dx"},
      .tolerance = kExact,
      .cases = {{"64x33", {{"rows", 64}, {"cols", 33}}},
                {"nan", {{"rows", 3}, {"cols", 37}, {"nan", 1}}},
                {"empty", {{"rows", 0}, {"cols", 5}}}},
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        OpTensors t;
        // y is a ReLU's output: zeros where the input was negative (NaN kept in the "nan" case).
        Tensor x = c.flag("nan") ? with_nans_and_zeros(rows_cols(c), DType::Float64, rng)
                                 : uniform_tensor(rows_cols(c), DType::Float64, rng);
        std::vector<double> y = x.to_doubles();
        for (double& v : y) v = reference_relu(v);
        t.add("y", Tensor::from_doubles(rows_cols(c), dt, y));
        t.add("dy", uniform_tensor(rows_cols(c), dt, rng));
        t.add("dx", nan_tensor(rows_cols(c), dt));
        return t;
      },
      .call = [](Backend& be, const OpCase&, OpTensors& t) { be.relu_backward(t.at("y"), t.at("dy"), t.at("dx")); },
      .reference = [](const OpCase&, const OpTensors& in) {
        const std::vector<double> y = in.values("y"), dy = in.values("dy");
        std::vector<double> dx(y.size());
        // threshold_backward: the gradient is blocked only where the output is a number <= 0.
        for (size_t i = 0; i < y.size(); ++i) dx[i] = (!std::isnan(y[i]) && y[i] <= 0) ? 0.0 : dy[i];
        return OpValues{{"dx", dx}};
      },
  };
}

}  // namespace

std::vector<OpEntry> dense_op_entries() {
  return {fill_entry(),          gemm_entry(),          add_channel_bias_entry(), sum_channels_entry(),
          add_inplace_entry(),   addcmul_inplace_entry(), scale_inplace_entry(),  relu_forward_entry(),
          relu_backward_entry()};
}

}  // namespace dpv::test
