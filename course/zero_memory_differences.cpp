// Why rank 0's measured memory differs from the formula (zero_memory.h MemoryDifference): one line
// per known cause, each sized and worded from the run's own facts (Ψ, W, the flat layout, the
// partition, the optimizer, which tensors the plan has alive at that stage), and per kind whatever
// those causes leave over as an unexplained line, so the lines always add up to measured minus
// formula and a cause nobody wrote down shows instead of hiding.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "course/zero_memory.h"
#include "engine/error.h"

namespace dpv::course {
namespace {

std::string text(int64_t v) { return std::to_string(v); }
std::string text(double v) {  // 7.33, 25.5, 26
  std::ostringstream out;
  out.precision(2);
  out << std::fixed << v;
  std::string t = out.str();
  t.erase(t.find_last_not_of('0') + 1);
  if (t.back() == '.') t.pop_back();
  return t;
}

// The facts one point of one strategy is explained from.
struct Point {
  StrategyKind strategy;
  int stage = 0;                   // 0 (DDP) .. 3
  bool at_peak = false;
  MemoryBreakdown measured;        // rank 0
  FormulaParts formula;            // rank 0
  bool gathered_alive = false;     // the full flat parameter exists after this stage
  bool full_grad_alive = false;    // the backward's full flat gradient exists after this stage
  std::vector<int> backward_done;  // layers whose Backward stage has run in this iteration
  std::string where;               // "between iterations", "at its peak (after Forward 0: ...)"
};

class Lines {
 public:
  Lines(const MemoryComparison& c, const Point& p, std::vector<MemoryDifference>& out) : c_(c), p_(p), out_(out) {}
  void add(MemoryKind kind, int64_t bytes, const std::string& why) {
    out_.push_back({p_.strategy, kind, bytes, why, p_.at_peak, false, true});
    sum_ += bytes;
  }
  // What the lines of `kind` since the last call leave of measured minus formula.
  void rest(MemoryKind kind, int64_t measured, double formula) {
    const int64_t left = static_cast<int64_t>(std::llround(static_cast<double>(measured) - formula)) - sum_;
    if (left != 0)
      out_.push_back({p_.strategy, kind, left,
                      text(left) + " bytes of " + memory_kind_name(kind) + " " + p_.where +
                          " that none of the causes above accounts for",
                      p_.at_peak, false, false});
    sum_ = 0;
  }
  const MemoryComparison& c() const { return c_; }
  const Point& p() const { return p_; }

 private:
  const MemoryComparison& c_;
  const Point& p_;
  std::vector<MemoryDifference>& out_;
  int64_t sum_ = 0;
};

int64_t element_bytes(const MemoryComparison& c) { return static_cast<int64_t>(c.formula.param_bytes); }

// Elements of the parameters ZeroRedundancyOptimizer gave rank 0, and their names.
int64_t rank0_partition_numel(const MemoryComparison& c, std::string& names) {
  int64_t n = 0;
  if (c.partition.empty()) return 0;
  for (const std::string& name : c.partition[0]) {
    for (const FlatEntry& e : c.flat.entries)
      if (e.name == name) n += e.numel;
    names += (names.empty() ? "" : ", ") + name;
  }
  return n;
}

std::string psi_over_w(const MemoryComparison& c) {
  return "Ψ/W = " + text(static_cast<double>(c.parameters) / c.world);
}

std::string padding_words(const MemoryComparison& c) {
  return "the flat parameter is padded from Ψ = " + text(c.parameters) + " to L = " + text(c.flat.padded_numel) +
         " elements (a multiple of W = " + std::to_string(c.world) + "), so rank 0's slice holds L/W = " +
         text(c.flat.shard_numel()) + " elements, not " + psi_over_w(c);
}

std::string slice_words(const MemoryComparison& c) {
  return "L/W = " + text(c.flat.shard_numel()) + " elements, not " + psi_over_w(c);
}

void parameter_lines(Lines& l) {
  const MemoryComparison& c = l.c();
  const Point& p = l.p();
  const int64_t e = element_bytes(c), slice = c.flat.shard_numel() * e;
  if (c.buffer_bytes > 0)
    l.add(MemoryKind::Parameters, c.buffer_bytes,
          "the buffers (BatchNorm's running statistics, " + text(c.buffer_bytes) +
              " bytes) are kept whole on every rank and are not among the formula's Ψ parameters");
  if (p.stage == 2)
    l.add(MemoryKind::Parameters, slice - c.parameters * e,
          "FSDP SHARD_GRAD_OP frees the full parameter after the backward's reduce-scatter, so outside the "
          "forward and backward rank 0 keeps only its slice (" + text(c.flat.shard_numel()) +
              " elements; the formula's ZeRO-2 keeps all Ψ = " + text(c.parameters) + ")" +
              (c.flat.padding() > 0 ? "; " + padding_words(c) : std::string()));
  if (p.stage == 3 && c.flat.padding() > 0)
    l.add(MemoryKind::Parameters, static_cast<int64_t>(std::llround(slice - p.formula.parameters)), padding_words(c));
  l.rest(MemoryKind::Parameters, p.measured.parameters, p.formula.parameters);
}

// DDP's and ZeRO-1's .grad part way through the backward: the engine drops the last iteration's
// .grad when the backward begins, and each layer's Backward stage makes its parameters' anew.
void backward_progress_line(Lines& l) {
  const MemoryComparison& c = l.c();
  const Point& p = l.p();
  if (p.stage > 1 || p.backward_done.empty()) return;
  int64_t made = 0;
  for (const FlatEntry& e : c.flat.entries) {
    const int layer = std::stoi(e.name.substr(0, e.name.find('.')));
    if (std::find(p.backward_done.begin(), p.backward_done.end(), layer) != p.backward_done.end()) made += e.numel;
  }
  if (made == c.parameters) return;
  l.add(MemoryKind::Gradients, (made - c.parameters) * element_bytes(c),
        "the backward has made the gradients of " + text(made) + " of the Ψ = " + text(c.parameters) +
            " parameters so far (its Backward stages run from the last layer to layer " +
            std::to_string(p.backward_done.back()) + "); the last iteration's .grad was released when it began");
}

void gradient_lines(Lines& l) {
  const MemoryComparison& c = l.c();
  const Point& p = l.p();
  const int64_t e = element_bytes(c);
  backward_progress_line(l);
  if (p.stage >= 2 && c.flat.padding() > 0)
    l.add(MemoryKind::Gradients,
          static_cast<int64_t>(std::llround(c.flat.shard_numel() * e - p.formula.gradients)),
          "the averaged gradient slice is padded like the parameter: " + slice_words(c));
  if (p.stage >= 2 && p.full_grad_alive)
    l.add(MemoryKind::Gradients, c.flat.padded_numel * e,
          "the backward writes rank 0's own gradient of the whole flat parameter (L = " + text(c.flat.padded_numel) +
              " elements) until the reduce-scatter leaves it the averaged slice");
  l.rest(MemoryKind::Gradients, p.measured.gradients, p.formula.gradients);
}

void optimizer_lines(Lines& l) {
  const MemoryComparison& c = l.c();
  const Point& p = l.p();
  const double k = c.formula.optimizer_bytes;
  const std::string optimizer = optimizer_class_name(c.run.optimizer.kind);
  if (p.stage == 1 && k > 0) {
    std::string names;
    const int64_t n0 = rank0_partition_numel(c, names);
    l.add(MemoryKind::Optimizer, static_cast<int64_t>(std::llround(n0 * k - p.formula.optimizer)),
          "ZeroRedundancyOptimizer partitions whole parameters (largest first, each to the rank with the fewest "
          "elements): rank 0 steps " + names + ", " + text(n0) + " elements, not " + psi_over_w(c));
  }
  if (p.stage >= 2 && k > 0 && c.flat.padding() > 0)
    l.add(MemoryKind::Optimizer, static_cast<int64_t>(std::llround(c.flat.shard_numel() * k - p.formula.optimizer)),
          optimizer + "'s state covers the padded slice: " + slice_words(c));
  if (c.run.optimizer.kind != OptimizerKind::Sgd && !p.at_peak)  // Adam, AdamW
    l.add(MemoryKind::Optimizer, 0,
          optimizer + "'s `step` counters are host tensors (PyTorch 1.13 keeps `step` on the CPU unless "
                      "capturable), so they cost the device nothing and K = " + text(k) + " counts the two moments only");
  l.rest(MemoryKind::Optimizer, p.measured.optimizer, p.formula.optimizer);
}

void communication_lines(Lines& l) {
  const MemoryComparison& c = l.c();
  const Point& p = l.p();
  const int64_t e = element_bytes(c);
  if (p.stage <= 1)
    l.add(MemoryKind::Buckets, c.parameters * e,
          "DDP's gradient buckets hold a second copy of every gradient (Ψ × " + text(e) + " bytes; "
          "gradient_as_bucket_view=False, PyTorch 1.13's default, does the same), which the formula leaves out");
  l.rest(MemoryKind::Buckets, p.measured.buckets, 0);
  if (p.stage >= 2 && p.gathered_alive)
    l.add(MemoryKind::Gathered, c.flat.padded_numel * e,
          "the full flat parameter all-gathered from every rank's slice (L = " + text(c.flat.padded_numel) +
              " elements) is alive " + p.where + ": the formula counts only what stays between iterations");
  l.rest(MemoryKind::Gathered, p.measured.gathered, 0);
}

void outside_formula_lines(Lines& l) {
  const MemoryComparison& c = l.c();
  const Point& p = l.p();
  const int64_t rows = (c.batch + c.world - 1) / c.world;  // DistributedSampler: ceil(N / W), padded
  if (p.measured.batch != 0)
    l.add(MemoryKind::Batch, p.measured.batch,
          "rank 0's shard of the batch (" + text(rows) + " of " + text(c.batch) +
              " samples and their labels) is input, not model state");
  l.rest(MemoryKind::Batch, p.measured.batch, 0);
  const int64_t activations = p.measured.activations + p.measured.output;
  if (activations != 0)
    l.add(MemoryKind::Activations, activations,
          std::string("activations (what the layers saved for the backward, the output and its gradient, the flow "
                      "between layers) grow with the batch, not with Ψ, and are not in the formula") +
              (p.at_peak ? "" : "; the engine's layers keep what they saved until their next forward, so they are "
                                "here between iterations too"));
  l.rest(MemoryKind::Activations, activations, 0);
}

enum class Moment { BetweenIterations, Peak, AfterStage };

Point make_point(const MemoryComparison& c, const StrategyMemory& s, int sample, Moment moment) {
  Point p;
  p.strategy = s.strategy;
  p.stage = zero_stage(s.strategy);
  p.at_peak = moment == Moment::Peak;
  p.measured = s.samples.at(static_cast<size_t>(sample)).ranks.at(0);
  p.formula = c.formula.parts(s.strategy);
  // Which full tensors the plan has alive after the sample's stage.
  for (int i = 0; i <= sample && i < static_cast<int>(s.samples.size()); ++i) {
    const StageKind k = s.samples[static_cast<size_t>(i)].stage.kind;
    if (k == StageKind::GatherParams) p.gathered_alive = true;
    if (k == StageKind::FreeParams || k == StageKind::ReduceScatter) p.gathered_alive = false;
    if (k == StageKind::Backward) {
      p.full_grad_alive = true;
      p.backward_done.push_back(s.samples[static_cast<size_t>(i)].stage.layer);
    }
    if (k == StageKind::ReduceScatter) p.full_grad_alive = false;
  }
  const std::string after = "(after " + s.samples.at(static_cast<size_t>(sample)).stage.title + ")";
  p.where = moment == Moment::Peak ? "at rank 0's peak " + after
            : moment == Moment::AfterStage ? after : "between iterations";
  return p;
}

void explain_point(const MemoryComparison& c, const Point& p, std::vector<MemoryDifference>& out) {
  Lines l(c, p, out);
  parameter_lines(l);
  gradient_lines(l);
  optimizer_lines(l);
  communication_lines(l);
  outside_formula_lines(l);
  if (p.measured.other != 0)
    out.push_back({p.strategy, MemoryKind::Batch, p.measured.other,
                   text(p.measured.other) + " bytes on rank 0's device counter " + p.where +
                       " beyond the tensors it lists (a collective's scratch in flight, a workspace)",
                   p.at_peak, true, false});
}

}  // namespace

std::vector<MemoryDifference> explain_differences(const MemoryComparison& c) {
  std::vector<MemoryDifference> out;
  for (const StrategyMemory& s : c.strategies) {
    if (s.persistent.empty() || s.samples.empty()) continue;
    explain_point(c, make_point(c, s, static_cast<int>(s.samples.size()) - 1, Moment::BetweenIterations), out);
    explain_point(c, make_point(c, s, s.peak_sample.at(0), Moment::Peak), out);
  }
  return out;
}

std::vector<MemoryDifference> explain_stage(const MemoryComparison& c, StrategyKind kind, int sample) {
  const StrategyMemory& s = c.of(kind);
  check(sample >= 0 && sample < static_cast<int>(s.samples.size()),
        "stage " + std::to_string(sample) + " is not one of the " + std::to_string(s.samples.size()) + " measured",
        ErrorClass::IndexError);
  std::vector<MemoryDifference> out;
  explain_point(c, make_point(c, s, sample, Moment::AfterStage), out);
  return out;
}

}  // namespace dpv::course
