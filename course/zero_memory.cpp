// Each rank's memory under DDP and ZeRO-1/2/3 (see zero_memory.h): the measurement, the formula
// and the "what fits" estimate. The difference lines are written in zero_memory_differences.cpp.
#include "course/zero_memory.h"

#include <algorithm>
#include <memory>

#include "engine/ddp/ddp.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/model_data.h"

namespace dpv::course {
namespace {

constexpr StrategyKind kCompared[] = {StrategyKind::DistributedDataParallel, StrategyKind::Zero1,
                                      StrategyKind::Zero2, StrategyKind::Zero3};

int64_t listed_bytes(const MemoryBreakdown& m) { return m.total() - m.other; }

// Each rank's largest sample (by its listed tensors) and the last one.
void read_peaks(StrategyMemory& m, int world) {
  const size_t w = static_cast<size_t>(world);
  m.at_peak.assign(w, MemoryBreakdown{});
  m.peak_total.assign(w, 0);
  m.peak_sample.assign(w, -1);
  for (size_t i = 0; i < m.samples.size(); ++i)
    for (size_t r = 0; r < w && r < m.samples[i].ranks.size(); ++r) {
      const MemoryBreakdown& b = m.samples[i].ranks[r];
      if (m.peak_sample[r] < 0 || listed_bytes(b) > listed_bytes(m.at_peak[r])) {
        m.at_peak[r] = b;
        m.peak_sample[r] = static_cast<int>(i);
      }
    }
  for (size_t r = 0; r < w; ++r) m.peak_total[r] = m.at_peak[r].total();
  m.persistent = m.samples.empty() ? std::vector<MemoryBreakdown>(w) : m.samples.back().ranks;
}

// One strategy from the same start: a warm-up iteration (construction, DDP's bucket rebuild, the
// optimizer's state created), then the measured one, stage by stage, with every rank's memory
// account (no value snapshots).
StrategyMemory measure_strategy(const RunSpec& run, StrategyKind kind, const Dataset& data, const TensorMap& state) {
  RunSpec spec = run;
  spec.strategy = kind;
  const std::unique_ptr<Strategy> strategy = make_strategy(spec, DeviceSet::create(spec.devices), &state);
  strategy->begin_iteration(data.inputs, data.targets)->run_to_end();
  const std::unique_ptr<StrategyIteration> it = strategy->begin_iteration(data.inputs, data.targets);
  auto* ddp = dynamic_cast<DdpIteration*>(it.get());
  check(ddp != nullptr, std::string("the memory comparison needs DDP's ranks, but ") + strategy_name(kind) +
                            " was built without them");
  ddp->set_memory_accounts(true);
  StrategyMemory m;
  m.strategy = kind;
  const int stages = static_cast<int>(it->plan().size());
  while (it->next_index() < stages) {
    const StageEvent e = it->step();
    MemorySample sample{e.stage, {}};
    for (const DeviceState& d : e.devices) sample.ranks.push_back(d.memory);
    m.samples.push_back(std::move(sample));
  }
  read_peaks(m, strategy->devices().size());
  return m;
}

// Rank 0's model state (buffers left out: they do not grow with the parameters) split as the
// strategy holds it: whole on every rank, sharded over the ranks, and what is alive only during
// the iteration beyond what stays between iterations (the gathered parameter, the full gradient).
struct StateSplit {
  double whole = 0, sharded = 0, transient = 0;
};

// The sharded part is every rank's share added up: rank 0's alone times W would carry its uneven
// ZeRO-1 share (whole parameters) into a model size where the partition is close to even.
StateSplit split_state(const MemoryComparison& c, const StrategyMemory& s) {
  const MemoryBreakdown& p = s.persistent.at(0);
  StateSplit split;
  const int stage = zero_stage(s.strategy);
  const double params = static_cast<double>(p.parameters - c.buffer_bytes);
  split.whole = static_cast<double>(p.buckets + p.gathered);
  split.whole += stage <= 1 ? params + static_cast<double>(p.gradients) : 0;
  split.whole += stage == 0 ? static_cast<double>(p.optimizer) : 0;
  for (const MemoryBreakdown& r : s.persistent) {
    if (stage >= 1) split.sharded += static_cast<double>(r.optimizer);
    if (stage >= 2) split.sharded += static_cast<double>(r.parameters - c.buffer_bytes + r.gradients);
  }
  int64_t most = 0;
  for (const MemorySample& sample : s.samples) most = std::max(most, model_state_bytes(sample.ranks.at(0)));
  split.transient = static_cast<double>(std::max<int64_t>(0, most - model_state_bytes(p)));
  return split;
}

}  // namespace

int64_t model_state_bytes(const MemoryBreakdown& m) {
  return m.parameters + m.gradients + m.optimizer + m.buckets + m.gathered;
}

double MemoryFormula::for_strategy(StrategyKind kind) const { return parts(kind).total(); }

double MemoryFormula::mixed_for_strategy(StrategyKind kind) const {
  switch (kind) {
    case StrategyKind::Zero1: return mixed_zero1;
    case StrategyKind::Zero2: return mixed_zero2;
    case StrategyKind::Zero3: return mixed_zero3;
    case StrategyKind::DataParallel:
    case StrategyKind::DistributedDataParallel: break;
  }
  return mixed_ddp;
}

FormulaParts MemoryFormula::parts(StrategyKind kind) const {
  const double psi = static_cast<double>(parameters), w = static_cast<double>(world);
  FormulaParts p{param_bytes * psi, grad_bytes * psi, optimizer_bytes * psi};  // DDP: everything whole
  const int stage = zero_stage(kind);
  if (stage >= 1) p.optimizer /= w;
  if (stage >= 2) p.gradients /= w;
  if (stage >= 3) p.parameters /= w;
  return p;
}

MemoryFormula memory_formula(int64_t parameters, int world, DType dtype, const OptimizerSettings& optimizer) {
  check(parameters >= 0, "a parameter count cannot be negative, got " + std::to_string(parameters),
        ErrorClass::ValueError);
  check(world >= 1, "the memory formula needs at least one rank, got " + std::to_string(world), ErrorClass::ValueError);
  MemoryFormula f;
  f.parameters = parameters;
  f.world = world;
  const double element = static_cast<double>(dtype_size(dtype));
  int states = 0;  // state tensors the size of the parameter (Adam's `step` is a host scalar)
  for (const std::string& name : optimizer_state_names(optimizer))
    if (name != "step") ++states;
  f.param_bytes = f.grad_bytes = element;
  f.optimizer_bytes = element * states;
  f.mixed_optimizer_bytes = 4.0 + 4.0 * states;
  f.ddp = f.for_strategy(StrategyKind::DistributedDataParallel);
  f.zero1 = f.for_strategy(StrategyKind::Zero1);
  f.zero2 = f.for_strategy(StrategyKind::Zero2);
  f.zero3 = f.for_strategy(StrategyKind::Zero3);
  MemoryFormula mixed = f;
  mixed.param_bytes = mixed.grad_bytes = 2;
  mixed.optimizer_bytes = f.mixed_optimizer_bytes;
  f.mixed_ddp = mixed.for_strategy(StrategyKind::DistributedDataParallel);
  f.mixed_zero1 = mixed.for_strategy(StrategyKind::Zero1);
  f.mixed_zero2 = mixed.for_strategy(StrategyKind::Zero2);
  f.mixed_zero3 = mixed.for_strategy(StrategyKind::Zero3);
  return f;
}

const StrategyMemory& MemoryComparison::of(StrategyKind kind) const {
  for (const StrategyMemory& s : strategies)
    if (s.strategy == kind) return s;
  throw Error(std::string("the memory comparison did not measure ") + strategy_name(kind), ErrorClass::ValueError);
}

MemoryComparison compare_memory(const RunSpec& run) {
  MemoryComparison c;
  c.run = run;
  const ModelSpec spec = run.model_spec();
  const Model model(spec);
  c.world = parse_device_spec(run.devices).count;
  c.batch = run.batch > 0 ? run.batch : (run.model ? 0 : default_batch(run.preset));
  check(c.batch >= 1, "the memory comparison needs a batch of at least one sample; give the run's batch",
        ErrorClass::ValueError);
  c.run.batch = c.batch;
  for (const auto& d : model.parameter_decls()) c.parameters += shape_numel(d.shape);
  for (const auto& d : model.buffer_decls())
    c.buffer_bytes += shape_numel(d.shape) * static_cast<int64_t>(dtype_size(d.dtype));
  c.flat = make_flat_layout(param_extents(model), c.world);
  c.partition = zero1_partition(param_extents(model), c.world);
  c.formula = memory_formula(c.parameters, c.world, spec.dtype, run.optimizer);
  const Dataset data = make_data_for_model(spec, c.batch, run.seed + 1);
  const TensorMap state = model.initial_state(run.seed);
  for (StrategyKind kind : kCompared) c.strategies.push_back(measure_strategy(c.run, kind, data, state));
  c.differences = explain_differences(c);
  return c;
}

std::vector<FitEstimate> what_fits(const MemoryComparison& measured, int64_t parameters, int world, double gpu_bytes) {
  check(parameters >= 1, "what fits needs at least one parameter, got " + std::to_string(parameters),
        ErrorClass::ValueError);
  check(world >= 1, "what fits needs at least one GPU, got " + std::to_string(world), ErrorClass::ValueError);
  check(gpu_bytes > 0, "what fits needs a GPU memory size above 0", ErrorClass::ValueError);
  check(measured.parameters >= 1 && !measured.strategies.empty(), "what fits needs a measured comparison first",
        ErrorClass::ValueError);
  const double psi = static_cast<double>(measured.parameters), target = static_cast<double>(parameters);
  std::vector<FitEstimate> out;
  for (const StrategyMemory& s : measured.strategies) {
    const StateSplit split = split_state(measured, s);
    // The sharded part, all ranks' shares together, is spread over `world` GPUs.
    FitEstimate f;
    f.strategy = s.strategy;
    f.persistent_bytes_per_gpu = target * (split.whole / psi) + target * (split.sharded / psi) / world;
    f.transient_bytes_per_gpu = target * (split.transient / psi);
    f.bytes_per_gpu = f.persistent_bytes_per_gpu + f.transient_bytes_per_gpu;
    f.fits = f.bytes_per_gpu <= gpu_bytes;
    f.is_formula = true;
    out.push_back(f);
  }
  return out;
}

}  // namespace dpv::course
