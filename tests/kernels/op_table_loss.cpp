// The op table's loss and optimizer entries: mean cross-entropy with its gradient (class counts
// from 2 to 1000, ignore_index rows, every row ignored, no rows) and torch.optim.SGD's step (with
// and without momentum and weight decay, first step or not), torch.optim.Adam and AdamW (L2 and
// decoupled weight decay, later steps), each with a tensor large enough that every
// GPU thread of a grid-stride loop takes a second trip.
#include <algorithm>
#include <cmath>

#include "tests/kernels/op_table.h"

namespace dpv::test {
namespace {

OpCase cross_entropy_case(std::string label, int64_t N, int64_t K, double ignored_fraction, double grad_scale) {
  return {std::move(label), {{"N", N}, {"K", K}, {"ignored_fraction", ignored_fraction}, {"grad_scale", grad_scale}}};
}

// Targets in [0, K), each one kIgnoreIndex with the case's probability.
Tensor random_targets(const OpCase& c, Rng& rng) {
  const int64_t N = c.size("N"), K = c.size("K");
  std::uniform_int_distribution<int64_t> pick(0, K - 1);
  std::bernoulli_distribution ignored(c.value("ignored_fraction"));
  std::vector<int64_t> t(static_cast<size_t>(N));
  for (int64_t& v : t) v = ignored(rng) ? kIgnoreIndex : pick(rng);
  // Where the rows are partly ignored, the first row is and the second is not, whatever the draw.
  const double fraction = c.value("ignored_fraction");
  if (fraction > 0 && fraction < 1 && N >= 2) {
    t[0] = kIgnoreIndex;
    t[1] = std::min<int64_t>(3, K - 1);
  }
  return Tensor::from_int64({N}, t);
}

OpEntry cross_entropy_entry() {
  return {
      .name = "cross_entropy",
      .outputs = {"loss", "dlogits"},
      .tolerance = kReduction,
      .cases = {cross_entropy_case("K2", 67, 2, 0, 0.5), cross_entropy_case("K10", 67, 10, 0, 0.5),
                cross_entropy_case("K1000", 67, 1000, 0, 0.5),
                cross_entropy_case("K10_quarter_ignored", 67, 10, 0.25, 1.0),
                // The mean over no rows is nan (PyTorch's result), every gradient 0.
                cross_entropy_case("all_ignored", 67, 10, 1.0, 1.0), cross_entropy_case("no_rows", 0, 5, 0, 1.0)},
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        const int64_t N = c.size("N"), K = c.size("K");
        OpTensors t;
        t.add("logits", uniform_tensor({N, K}, dt, rng, -4, 4));
        t.add("target", random_targets(c, rng));
        t.add("loss", Tensor::full({1}, dt, -1.0));  // a loss is never negative: a call that wrote nothing fails
        t.add("dlogits", nan_tensor({N, K}, dt));    // ignored rows too must be written (zeros)
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) {
        be.cross_entropy(t.at("logits"), t.at("target"), t.at("loss"), t.at("dlogits"), c.value("grad_scale"));
      },
      .reference = [](const OpCase& c, const OpTensors& in) {
        const int64_t N = c.size("N"), K = c.size("K");
        const std::vector<double> logits = in.values("logits");
        const std::vector<int64_t> target = in.at("target").to_int64();
        const auto counted = static_cast<double>(std::count_if(target.begin(), target.end(),
                                                               [](int64_t t) { return t != kIgnoreIndex; }));
        const double scale = c.value("grad_scale") / counted;
        std::vector<double> dlogits(logits.size(), 0.0);
        double total = 0;
        for (int64_t i = 0; i < N; ++i) {
          const int64_t t = target[static_cast<size_t>(i)];
          if (t == kIgnoreIndex) continue;
          const double* row = logits.data() + i * K;
          const double top = *std::max_element(row, row + K);
          double sum_exp = 0;
          for (int64_t k = 0; k < K; ++k) sum_exp += std::exp(row[k] - top);
          const double logsumexp = top + std::log(sum_exp);
          total += logsumexp - row[t];
          for (int64_t k = 0; k < K; ++k)
            dlogits[static_cast<size_t>(i * K + k)] = (std::exp(row[k] - logsumexp) - (k == t ? 1.0 : 0.0)) * scale;
        }
        return OpValues{{"loss", {total / counted}}, {"dlogits", dlogits}};
      },
  };
}

OpCase sgd_case(std::string label, double n, double momentum, double weight_decay, bool first_step, bool large = false) {
  return {std::move(label),
          {{"n", n}, {"lr", 0.05}, {"momentum", momentum}, {"weight_decay", weight_decay},
           {"first_step", first_step ? 1.0 : 0.0}, {"large", large ? 1.0 : 0.0}}};
}

OpEntry sgd_update_entry() {
  return {
      .name = "sgd_update",
      .outputs = {"param", "momentum_buf"},
      .tolerance = kElementwise,
      .cases = {sgd_case("plain", 301, 0, 0, true), sgd_case("momentum_first_step", 301, 0.9, 0, true),
                sgd_case("momentum_weight_decay", 301, 0.9, 1e-2, false),
                sgd_case("weight_decay_only", 301, 0, 5e-4, false),
                // 2^23 + 17 elements: more than a grid of (multiprocessors x 64) blocks of 256
                // threads on any GPU up to 500 multiprocessors.
                sgd_case("grid_stride", (1 << 23) + 17, 0.9, 1e-3, false, /*large=*/true)},
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        OpTensors t;
        for (const char* name : {"param", "grad", "momentum_buf"}) t.add(name, uniform_tensor({c.size("n")}, dt, rng));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) {
        be.sgd_update(t.at("param"), t.at("grad"), t.at("momentum_buf"), c.value("lr"), c.value("momentum"),
                      c.value("weight_decay"), c.flag("first_step"));
      },
      .reference = [](const OpCase& c, const OpTensors& in) {
        const double lr = c.value("lr"), momentum = c.value("momentum"), wd = c.value("weight_decay");
        std::vector<double> p = in.values("param"), buf = in.values("momentum_buf");
        const std::vector<double> g = in.values("grad");
        for (size_t i = 0; i < p.size(); ++i) {
          double d = g[i] + wd * p[i];
          if (momentum != 0) {  // without momentum the buffer is not touched
            buf[i] = c.flag("first_step") ? d : momentum * buf[i] + d;
            d = buf[i];
          }
          p[i] -= lr * d;
        }
        return OpValues{{"param", p}, {"momentum_buf", buf}};
      },
  };
}

OpCase adam_case(std::string label, double n, double weight_decay, bool adamw, double step, bool large = false) {
  return {std::move(label),
          {{"n", n}, {"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", weight_decay},
           {"adamw", adamw ? 1.0 : 0.0}, {"step", step}, {"large", large ? 1.0 : 0.0}}};
}

kernels::math::AdamStep adam_step_of(const OpCase& c) {
  return {.lr = c.value("lr"), .beta1 = c.value("beta1"), .beta2 = c.value("beta2"), .eps = c.value("eps"),
          .weight_decay = c.value("weight_decay"), .decoupled_weight_decay = c.flag("adamw"),
          .step = static_cast<int64_t>(c.value("step"))};
}

// torch.optim.Adam / AdamW's single-tensor step, written out in double from adam.py (not from
// kernels/math/adam.h), so the shared per-element code is checked against an independent version.
OpEntry adam_update_entry() {
  return {
      .name = "adam_update",
      .outputs = {"param", "exp_avg", "exp_avg_sq"},
      .tolerance = kElementwise,
      .cases = {adam_case("adam_first_step", 301, 0, false, 1), adam_case("adam_l2", 301, 1e-2, false, 7),
                adam_case("adamw_decoupled", 301, 1e-2, true, 3), adam_case("adamw_no_decay", 301, 0, true, 2),
                adam_case("grid_stride", (1 << 23) + 17, 1e-2, true, 4, /*large=*/true)},
      .make = [](const OpCase& c, DType dt, Rng& rng) {
        OpTensors t;
        for (const char* name : {"param", "grad", "exp_avg"}) t.add(name, uniform_tensor({c.size("n")}, dt, rng));
        // A second moment is a running mean of squares: never negative.
        t.add("exp_avg_sq", uniform_tensor({c.size("n")}, dt, rng, 0.0, 1.0));
        return t;
      },
      .call = [](Backend& be, const OpCase& c, OpTensors& t) {
        be.adam_update(t.at("param"), t.at("grad"), t.at("exp_avg"), t.at("exp_avg_sq"), adam_step_of(c));
      },
      .reference = [](const OpCase& c, const OpTensors& in) {
        const kernels::math::AdamStep s = adam_step_of(c);
        std::vector<double> p = in.values("param"), m = in.values("exp_avg"), v = in.values("exp_avg_sq");
        const std::vector<double> g = in.values("grad");
        const double bc1 = 1 - std::pow(s.beta1, double(s.step)), bc2 = 1 - std::pow(s.beta2, double(s.step));
        for (size_t i = 0; i < p.size(); ++i) {
          double grad = g[i];
          if (s.decoupled_weight_decay) p[i] *= 1 - s.lr * s.weight_decay;
          else grad += s.weight_decay * p[i];
          m[i] = s.beta1 * m[i] + (1 - s.beta1) * grad;
          v[i] = s.beta2 * v[i] + (1 - s.beta2) * grad * grad;
          p[i] -= (s.lr / bc1) * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + s.eps);
        }
        return OpValues{{"param", p}, {"exp_avg", m}, {"exp_avg_sq", v}};
      },
  };
}

}  // namespace

std::vector<OpEntry> loss_op_entries() { return {cross_entropy_entry(), sgd_update_entry(), adam_update_entry()}; }

}  // namespace dpv::test
