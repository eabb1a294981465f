// The op table's BatchNorm entries over x [N, C, S]: statistics, invstd, normalisation (plain and
// fused with ReLU), the backward reduction and element pass (plain and fused), SyncBatchNorm's
// merge of per-rank statistics and the running-statistics update. Both layouts of the channel
// reductions: S = 1 (BatchNorm1d after a Linear layer) and S > 1 (BatchNorm2d); C = 70, not a
// multiple of 32.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "tests/kernels/op_table.h"

namespace dpv::test {
namespace {

constexpr double kEps = 1e-5;
// The element pass combines three per-channel terms with cancellation between them.
constexpr Tolerance kBackwardElemt{10 * kReduction.float32, 10 * kReduction.float64};

const std::vector<OpCase> kBnCases{{"S1", {{"N", 45}, {"C", 70}, {"S", 1}}},
                                   {"S36", {{"N", 45}, {"C", 70}, {"S", 36}}}};

Shape ncs(const OpCase& c) { return {c.size("N"), c.size("C"), c.size("S")}; }
Shape channels(const OpCase& c) { return {c.size("C")}; }

struct ChannelStats {
  std::vector<double> mean, var_b;  // [C] each; var_b biased
};

// Two passes in double: the mean, then the mean squared deviation from it.
ChannelStats reference_stats(const std::vector<double>& x, int64_t N, int64_t C, int64_t S) {
  ChannelStats st{std::vector<double>(static_cast<size_t>(C)), std::vector<double>(static_cast<size_t>(C))};
  const double count = static_cast<double>(N * S);
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0, squares = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) sum += x[at_ncs(n, c, s, C, S)];
    const double mean = sum / count;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) squares += (x[at_ncs(n, c, s, C, S)] - mean) * (x[at_ncs(n, c, s, C, S)] - mean);
    st.mean[static_cast<size_t>(c)] = mean;
    st.var_b[static_cast<size_t>(c)] = squares / count;
  }
  return st;
}

std::vector<double> reference_normalize(const OpCase& c, const OpTensors& in, bool relu) {
  const int64_t N = c.size("N"), C = c.size("C"), S = c.size("S");
  const std::vector<double> mean = in.values("mean"), invstd = in.values("invstd");
  const std::vector<double> gamma = in.values("gamma"), beta = in.values("beta");
  std::vector<double> y = in.values("x");
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t s = 0; s < S; ++s) {
        const size_t i = at_ncs(n, ch, s, C, S), k = static_cast<size_t>(ch);
        const double v = (y[i] - mean[k]) * invstd[k] * gamma[k] + beta[k];
        y[i] = relu ? std::max(v, 0.0) : v;
      }
  return y;
}

// x with an offset far from zero (a one-pass variance would lose digits there; two passes must
// not), its statistics stored in the dtype, gamma, beta and an upstream gradient dy.
OpTensors batchnorm_inputs(const OpCase& c, DType dt, Rng& rng) {
  OpTensors t;
  t.add("x", uniform_tensor(ncs(c), dt, rng, 3.0, 5.0));
  const ChannelStats st = reference_stats(t.values("x"), c.size("N"), c.size("C"), c.size("S"));
  std::vector<double> invstd(st.var_b.size());
  for (size_t k = 0; k < invstd.size(); ++k) invstd[k] = 1 / std::sqrt(st.var_b[k] + kEps);
  t.add("mean", Tensor::from_doubles(channels(c), dt, st.mean));
  t.add("invstd", Tensor::from_doubles(channels(c), dt, invstd));
  t.add("gamma", uniform_tensor(channels(c), dt, rng, 0.5, 1.5));
  t.add("beta", uniform_tensor(channels(c), dt, rng));
  t.add("dy", uniform_tensor(ncs(c), dt, rng));
  return t;
}

// sum_dy[C] = sum of g;  sum_dy_xmu[C] = sum of g * (x - mean).
OpValues reference_backward_sums(const OpCase& c, const std::vector<double>& g, const OpTensors& in) {
  const int64_t N = c.size("N"), C = c.size("C"), S = c.size("S");
  const std::vector<double> x = in.values("x"), mean = in.values("mean");
  std::vector<double> sum_dy(static_cast<size_t>(C), 0.0), sum_dy_xmu(static_cast<size_t>(C), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t s = 0; s < S; ++s) {
        const size_t i = at_ncs(n, ch, s, C, S), k = static_cast<size_t>(ch);
        sum_dy[k] += g[i];
        sum_dy_xmu[k] += g[i] * (x[i] - mean[k]);
      }
  return {{"sum_dy", sum_dy}, {"sum_dy_xmu", sum_dy_xmu}};
}

// dx = (g - sum_dy/n - (x - mean) * invstd^2 * sum_dy_xmu/n) * invstd * gamma.
std::vector<double> reference_backward_elemt(const OpCase& c, const std::vector<double>& g, const OpTensors& in,
                                             const std::vector<double>& sum_dy, const std::vector<double>& sum_dy_xmu,
                                             double count) {
  const int64_t N = c.size("N"), C = c.size("C"), S = c.size("S");
  const std::vector<double> x = in.values("x"), mean = in.values("mean");
  const std::vector<double> invstd = in.values("invstd"), gamma = in.values("gamma");
  std::vector<double> dx(g.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t s = 0; s < S; ++s) {
        const size_t i = at_ncs(n, ch, s, C, S), k = static_cast<size_t>(ch);
        const double projected = (x[i] - mean[k]) * invstd[k] * invstd[k] * sum_dy_xmu[k] / count;
        dx[i] = (g[i] - sum_dy[k] / count - projected) * invstd[k] * gamma[k];
      }
  return dx;
}

// The count of the element pass: this device's N*S, or SyncBatchNorm's total over the ranks.
double backward_count(const OpCase& c) {
  return c.value_or("count_factor", 1) * static_cast<double>(c.size("N") * c.size("S"));
}

OpEntry bn_stats_entry() {
  return {
      .name = "bn_stats",
      .outputs = {"mean", "var_b"},
      .tolerance = kReduction,
      .cases = kBnCases,
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        OpTensors t;
        t.add("x", uniform_tensor(ncs(c), dt, rng, 3.0, 5.0));
        t.add("mean", nan_tensor(channels(c), dt));
        t.add("var_b", nan_tensor(channels(c), dt));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) {
        be.bn_stats(t.at("x"), t.at("mean"), t.at("var_b"), c.size("N"), c.size("C"), c.size("S"));
      },
      .reference = [](const OpCase& c, const OpTensors& in) {
        const ChannelStats st = reference_stats(in.values("x"), c.size("N"), c.size("C"), c.size("S"));
        return OpValues{{"mean", st.mean}, {"var_b", st.var_b}};
      },
  };
}

OpEntry bn_invstd_entry() {
  return {
      .name = "bn_invstd",
      .outputs = {"invstd"},
      .tolerance = kElementwise,
      .cases = {{"C70", {{"C", 70}}}, {"zero_variance", {{"C", 70}, {"zero_variance", 1}}}},
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        OpTensors t;
        // A channel of identical values has variance 0: invstd is then 1/sqrt(eps).
        t.add("var_b", c.flag("zero_variance") ? Tensor::zeros(channels(c), dt)
                                               : uniform_tensor(channels(c), dt, rng, 0.1, 2.0));
        t.add("invstd", nan_tensor(channels(c), dt));
        return t;
      },
      .call = [](Backend& be, const OpCase&, OpTensors& t) { be.bn_invstd(t.at("var_b"), kEps, t.at("invstd")); },
      .reference = [](const OpCase&, const OpTensors& in) {
        std::vector<double> invstd = in.values("var_b");
        for (double& v : invstd) v = 1 / std::sqrt(v + kEps);
        return OpValues{{"invstd", invstd}};
      },
  };
}

OpEntry bn_normalize_entry(bool relu) {
  return {
      .name = relu ? "bn_normalize_relu" : "bn_normalize",
      .outputs = {"y"},
      .tolerance = kReduction,
      .cases = kBnCases,
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        OpTensors t = batchnorm_inputs(c, dt, rng);
        t.add("y", nan_tensor(ncs(c), dt));
        return t;
      },
      .call = [relu](Backend& be, const OpCase& c, OpTensors& t) {
        const int64_t N = c.size("N"), C = c.size("C"), S = c.size("S");
        if (relu)
          be.bn_normalize_relu(t.at("x"), t.at("mean"), t.at("invstd"), t.at("gamma"), t.at("beta"), t.at("y"), N, C, S);
        else
          be.bn_normalize(t.at("x"), t.at("mean"), t.at("invstd"), t.at("gamma"), t.at("beta"), t.at("y"), N, C, S);
      },
      .reference = [relu](const OpCase& c, const OpTensors& in) {
        return OpValues{{"y", reference_normalize(c, in, relu)}};
      },
  };
}

OpEntry bn_backward_reduce_entry() {
  return {
      .name = "bn_backward_reduce",
      .outputs = {"sum_dy", "sum_dy_xmu"},
      .tolerance = kReduction,
      .cases = kBnCases,
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        OpTensors t = batchnorm_inputs(c, dt, rng);
        t.add("sum_dy", nan_tensor(channels(c), dt));
        t.add("sum_dy_xmu", nan_tensor(channels(c), dt));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) {
        be.bn_backward_reduce(t.at("dy"), t.at("x"), t.at("mean"), t.at("sum_dy"), t.at("sum_dy_xmu"), c.size("N"),
                              c.size("C"), c.size("S"));
      },
      .reference = [](const OpCase& c, const OpTensors& in) { return reference_backward_sums(c, in.values("dy"), in); },
  };
}

OpEntry bn_backward_elemt_entry() {
  std::vector<OpCase> cases = kBnCases;
  cases.push_back({"S36_global_count", {{"N", 45}, {"C", 70}, {"S", 36}, {"count_factor", 4}}});
  return {
      .name = "bn_backward_elemt",
      .outputs = {"dx"},
      .tolerance = kBackwardElemt,
      .cases = cases,
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        OpTensors t = batchnorm_inputs(c, dt, rng);
        const OpValues sums = reference_backward_sums(c, t.values("dy"), t);  // what the reduction gives
        t.add("sum_dy", Tensor::from_doubles(channels(c), dt, sums.at("sum_dy")));
        t.add("sum_dy_xmu", Tensor::from_doubles(channels(c), dt, sums.at("sum_dy_xmu")));
        t.add("dx", nan_tensor(ncs(c), dt));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) {
        be.bn_backward_elemt(t.at("dy"), t.at("x"), t.at("mean"), t.at("invstd"), t.at("gamma"), t.at("sum_dy"),
                             t.at("sum_dy_xmu"), backward_count(c), t.at("dx"), c.size("N"), c.size("C"), c.size("S"));
      },
      .reference = [](const OpCase& c, const OpTensors& in) {
        return OpValues{{"dx", reference_backward_elemt(c, in.values("dy"), in, in.values("sum_dy"),
                                                        in.values("sum_dy_xmu"), backward_count(c))}};
      },
  };
}

OpEntry bn_relu_backward_entry() {
  return {
      .name = "bn_relu_backward",
      .outputs = {"sum_dy", "sum_dy_xmu", "dx"},
      .tolerance = kBackwardElemt,
      .cases = kBnCases,
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        OpTensors t = batchnorm_inputs(c, dt, rng);
        t.add("y", Tensor::from_doubles(ncs(c), dt, reference_normalize(c, t, /*relu=*/true)));  // the fused forward's
        t.add("sum_dy", nan_tensor(channels(c), dt));
        t.add("sum_dy_xmu", nan_tensor(channels(c), dt));
        t.add("dx", nan_tensor(ncs(c), dt));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) {
        be.bn_relu_backward(t.at("dy"), t.at("y"), t.at("x"), t.at("mean"), t.at("invstd"), t.at("gamma"),
                            t.at("sum_dy"), t.at("sum_dy_xmu"), backward_count(c), t.at("dx"), c.size("N"), c.size("C"),
                            c.size("S"));
      },
      .reference = [](const OpCase& c, const OpTensors& in) {
        // ReLU's backward first: the gradient passes where the fused output is positive.
        std::vector<double> g = in.values("dy");
        const std::vector<double> y = in.values("y");
        for (size_t i = 0; i < g.size(); ++i) g[i] = y[i] > 0 ? g[i] : 0.0;
        OpValues out = reference_backward_sums(c, g, in);
        out["dx"] = reference_backward_elemt(c, g, in, out.at("sum_dy"), out.at("sum_dy_xmu"), backward_count(c));
        return out;
      },
  };
}

// SyncBatchNorm's merge, written as the totals over the ranks (not the backends' merge in rank
// order): n = sum of the counts, mean = sum count*mean / n, M2 = sum count*(var + (mean_r - mean)^2)
// with var = 1/invstd^2 - eps; ranks with count < 1 are left out, as PyTorch does.
OpValues reference_gather(const OpCase& c, const OpTensors& in) {
  const int64_t R = c.size("R"), C = c.size("C");
  const double momentum = c.value("momentum");
  const std::vector<double> mean_all = in.values("mean_all"), invstd_all = in.values("invstd_all");
  const std::vector<double> counts = in.values("counts");
  OpValues out{{"mean", {}}, {"invstd", {}}, {"running_mean", {}}, {"running_var", {}}};
  const bool running = in.at("running_mean").defined();
  if (running) {
    out["running_mean"] = in.values("running_mean");
    out["running_var"] = in.values("running_var");
  }
  for (int64_t ch = 0; ch < C; ++ch) {
    double n = 0, weighted_mean = 0;
    for (int64_t r = 0; r < R; ++r)
      if (counts[static_cast<size_t>(r)] >= 1) {
        n += counts[static_cast<size_t>(r)];
        weighted_mean += counts[static_cast<size_t>(r)] * mean_all[static_cast<size_t>(r * C + ch)];
      }
    const double mean = weighted_mean / n;
    double m2 = 0;
    for (int64_t r = 0; r < R; ++r) {
      const double count = counts[static_cast<size_t>(r)];
      if (count < 1) continue;
      const double m = mean_all[static_cast<size_t>(r * C + ch)], is = invstd_all[static_cast<size_t>(r * C + ch)];
      m2 += count * ((1 / (is * is) - kEps) + (m - mean) * (m - mean));
    }
    out["mean"].push_back(mean);
    out["invstd"].push_back(1 / std::sqrt(m2 / n + kEps));
    if (running) {
      double& rm = out["running_mean"][static_cast<size_t>(ch)];
      double& rv = out["running_var"][static_cast<size_t>(ch)];
      rm = (1 - momentum) * rm + momentum * mean;
      rv = (1 - momentum) * rv + momentum * m2 / (n - 1);  // unbiased over the total count
    }
  }
  return out;
}

OpEntry bn_gather_stats_entry() {
  // Uneven counts and one empty rank (masked out).
  const std::map<std::string, double> ranks{{"R", 4}, {"C", 70}, {"momentum", 0.1}};
  OpCase with_running{"ranks4_running_stats", ranks}, without_running{"ranks4_no_running_stats", ranks};
  without_running.values["no_running_stats"] = 1;  // track_running_stats=False: the merge still runs
  return {
      .name = "bn_gather_stats",
      .outputs = {"mean", "invstd", "running_mean", "running_var"},
      .tolerance = kReduction,
      .cases = {with_running, without_running},
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        const int64_t R = c.size("R"), C = c.size("C");
        OpTensors t;
        t.add("mean_all", uniform_tensor({R, C}, dt, rng));
        t.add("invstd_all", uniform_tensor({R, C}, dt, rng, 0.5, 3.0));
        t.add("counts", Tensor::from_doubles({R}, DType::Float64, {5, 3, 0, 7}));
        const bool running = !c.flag("no_running_stats");
        t.add("running_mean", running ? uniform_tensor({C}, dt, rng) : Tensor());
        t.add("running_var", running ? uniform_tensor({C}, dt, rng, 0.5, 1.5) : Tensor());
        t.add("mean", nan_tensor({C}, dt));
        t.add("invstd", nan_tensor({C}, dt));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) {
        be.bn_gather_stats(t.at("mean_all"), t.at("invstd_all"), t.at("counts").to_doubles(), kEps, c.value("momentum"),
                           t.at("running_mean"), t.at("running_var"), t.at("mean"), t.at("invstd"), c.size("R"),
                           c.size("C"));
      },
      .reference = reference_gather,
  };
}

OpEntry bn_update_running_entry() {
  return {
      .name = "bn_update_running",
      .outputs = {"running_mean", "running_var"},
      .tolerance = kElementwise,
      .cases = {{"n8_momentum0.1", {{"C", 70}, {"n", 8}, {"momentum", 0.1}}},
                {"n2_momentum1", {{"C", 70}, {"n", 2}, {"momentum", 1}}}},
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        OpTensors t;
        t.add("mean", uniform_tensor(channels(c), dt, rng));
        t.add("var_b", uniform_tensor(channels(c), dt, rng, 0.1, 2.0));
        t.add("running_mean", uniform_tensor(channels(c), dt, rng));
        t.add("running_var", uniform_tensor(channels(c), dt, rng, 0.5, 1.5));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) {
        be.bn_update_running(t.at("mean"), t.at("var_b"), c.value("n"), c.value("momentum"), t.at("running_mean"),
                             t.at("running_var"));
      },
      .reference = [](const OpCase& c, const OpTensors& in) {
        const double n = c.value("n"), momentum = c.value("momentum");
        std::vector<double> rm = in.values("running_mean"), rv = in.values("running_var");
        const std::vector<double> mean = in.values("mean"), var_b = in.values("var_b");
        for (size_t k = 0; k < rm.size(); ++k) {
          rm[k] = (1 - momentum) * rm[k] + momentum * mean[k];
          rv[k] = (1 - momentum) * rv[k] + momentum * var_b[k] * n / (n - 1);  // the unbiased variance
        }
        return OpValues{{"running_mean", rm}, {"running_var", rv}};
      },
  };
}

}  // namespace

std::vector<OpEntry> norm_op_entries() {
  return {bn_stats_entry(),          bn_invstd_entry(),          bn_normalize_entry(false),
          bn_normalize_entry(true),  bn_backward_reduce_entry(), bn_backward_elemt_entry(),
          bn_relu_backward_entry(),  bn_gather_stats_entry(),    bn_update_running_entry()};
}

}  // namespace dpv::test
