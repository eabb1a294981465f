// Scenarios about what a rank holds under the sharded strategies: what stays between iterations
// (rank 0's memory by kind after the last stage, from the stage events), which stage first shards
// the gradients, whether the model ends where DDP's does, and what becomes of the flat parameter's
// padding and its optimizer state. Each runs the engine's ranks on simulated CPU devices.
#include <algorithm>
#include <cmath>

#include "course/scenario_support.h"
#include "engine/error.h"

namespace dpv::course::detail {

namespace {

// How much of the model's `full` bytes a rank holds of one kind: "full", "slice" (its 1/W share,
// padding included), "part" (some other share: ZeRO-1's whole parameters) or "none".
std::string share(int64_t bytes, int64_t full, int64_t slice) {
  if (bytes == 0) return "none";
  if (bytes >= full) return "full";
  if (bytes == slice) return "slice";
  return "part";
}

struct Sizes {
  int64_t params = 0;       // Ψ × element bytes
  int64_t state = 0;        // the optimizer's parameter-shaped state: states × Ψ × element bytes
  int64_t slice = 0;        // FSDP: L / W × element bytes (ZeRO-1, DDP: Ψ / W rounded up)
  int states = 0;
};
Sizes sizes_of(const ZeroRun& run, const OptimizerSettings& optimizer) {
  const DdpTrainer& t = *run.trainer;
  Sizes s;
  const int64_t element = static_cast<int64_t>(dtype_size(t.model().dtype()));
  int64_t numel = 0;
  for (const auto& d : t.model().parameter_decls()) numel += shape_numel(d.shape);
  for (const auto& name : optimizer_state_names(optimizer)) s.states += name != "step";
  s.params = numel * element;
  s.state = s.states * s.params;
  const int64_t world = t.world_size();
  s.slice = (t.options().zero_stage >= 2 ? t.rank(0).flat_layout().shard_numel() : (numel + world - 1) / world) * element;
  return s;
}

// Rank 0's memory after the last stage of the recorded iteration: what it keeps until the next.
const MemoryBreakdown& persistent(const ZeroRun& run) { return run.recorder.events.back().devices.at(0).memory; }

std::string bytes_line(const std::string& who, const MemoryBreakdown& m) {
  return who + ", rank 0 between iterations: parameters " + std::to_string(m.parameters) + " bytes, gradients " +
         std::to_string(m.gradients) + ", optimizer state " + std::to_string(m.optimizer) + ", gathered " +
         std::to_string(m.gathered) + ".";
}

const char* stage_name(int stage) { return strategy_short_name(rank_strategy(stage)); }

// The padding at the end of the last rank's slice of `values` ([L/W]): every value 0?
bool padding_is_zero(const Tensor& values, int64_t real) {
  const std::vector<double> v = values.to_doubles();
  return std::all_of(v.begin() + real, v.end(), [](double x) { return x == 0.0; });
}

ScenarioResult padding_state(const Params& p, const ModelSpec& spec, const Batch& batch) {
  const int world = p.integer("devices"), stage = p.integer("stage");
  check(stage >= 2, "'padding_state' is about FSDP's flat parameter: set 'stage' to 2 or 3", ErrorClass::ValueError);
  const OptimizerSettings optimizer = zero_optimizer(p);
  auto run = run_zero(world, spec, batch, stage, optimizer, 3);
  const DdpRank& last = run->trainer->rank(world - 1);
  const FlatLayout& layout = last.flat_layout();
  check(layout.padding() > 0, "this model fills the flat parameter exactly on " + std::to_string(world) +
                                  " ranks: pick a W that leaves padding", ErrorClass::ValueError);
  const int64_t real = layout.shard_real_numel(world - 1);
  const DdpRankResult result = last.result();
  ScenarioResult r;
  r.title = std::string(stage_name(stage)) + " with " + optimizer_class_name(optimizer.kind) + " on cpu:" +
            std::to_string(world) + ", three iterations";
  r.lines.push_back("The flat parameter holds " + std::to_string(layout.numel) + " elements, padded to " +
                    std::to_string(layout.padded_numel) + ": the last " + std::to_string(layout.padding()) +
                    " elements of rank " + std::to_string(world - 1) + "'s slice of " + std::to_string(layout.shard_numel()) + ".");
  bool zero = padding_is_zero(result.flat_param, real) && padding_is_zero(result.flat_grad, real);
  bool covers = true;
  for (const auto& [name, t] : result.flat_state.items()) {
    covers = covers && t.numel() == layout.shard_numel();
    const bool z = t.numel() == layout.shard_numel() && padding_is_zero(t, real);
    zero = zero && z;
    r.lines.push_back("Optimizer state '" + name + "' of the slice: " + std::to_string(t.numel()) + " elements, padding " +
                      (z ? "all zero." : "not zero."));
  }
  r.lines.push_back(std::string("The padding's parameter values and gradients: ") +
                    (padding_is_zero(result.flat_param, real) && padding_is_zero(result.flat_grad, real) ? "all zero." : "not all zero."));
  r.answer_value = result.flat_state.empty() || !covers ? "absent" : zero ? "zero" : "nonzero";
  return r;
}

}  // namespace

ScenarioResult run_zero_state(const Params& p) {
  const int world = p.integer("devices"), stage = p.integer("stage");
  const std::string ask = p.text("ask");
  const ModelSpec spec = scenario_model(p, "simple");
  const Batch batch = ddp_batch(spec, p.integer("batch"), 43);
  if (ask == "padding_state") return padding_state(p, spec, batch);
  const OptimizerSettings optimizer = zero_optimizer(p);
  ScenarioResult r;
  if (ask == "persistent") {
    auto run = run_zero(world, spec, batch, stage, optimizer, 2);
    const Sizes s = sizes_of(*run, optimizer);
    const MemoryBreakdown& m = persistent(*run);
    r.title = std::string(stage_name(stage)) + " on cpu:" + std::to_string(world) + ": what rank 0 keeps after iteration 2";
    r.lines.push_back(bytes_line(stage_name(stage), m));
    r.lines.push_back("The whole model: parameters " + std::to_string(s.params) + " bytes, optimizer state " +
                      std::to_string(s.state) + "; one rank's 1/W slice: " + std::to_string(s.slice) + " bytes.");
    r.answer_value = "params:" + share(m.parameters, s.params, s.slice) + ",grads:" + share(m.gradients, s.params, s.slice) +
                     ",optim:" + share(m.optimizer, s.state, s.states * s.slice) + ",gathered:" +
                     share(m.gathered, s.params, s.slice);
    r.facts = {{"persistent", r.answer_value}};
    return r;
  }
  if (ask == "grad_shards") {
    r.title = "Gradients rank 0 holds at the optimizer step, DDP and ZeRO-1/2/3 on cpu:" + std::to_string(world);
    r.answer_value = "none";
    for (int s = 0; s <= 3; ++s) {
      auto run = run_zero(world, spec, batch, s, optimizer, 1);
      const Sizes sizes = sizes_of(*run, optimizer);
      int64_t grads = 0;
      for (const StageEvent& e : run->recorder.events)
        if (e.stage.kind == StageKind::Step) grads = e.devices.at(0).memory.gradients;
      const std::string held = share(grads, sizes.params, sizes.slice);
      r.lines.push_back(std::string(stage_name(s)) + ": " + std::to_string(grads) + " bytes of gradients (" + held +
                        "; the full model's are " + std::to_string(sizes.params) + ").");
      if (held == "slice" && r.answer_value == "none") r.answer_value = std::to_string(s);
    }
    return r;
  }
  // vs_ddp: the parameters after two iterations (optimizer state in play) against DDP's.
  check(stage >= 1, "'vs_ddp' compares a ZeRO stage with DDP: set 'stage' to 1, 2 or 3", ErrorClass::ValueError);
  const TensorMap ddp = full_parameters(*run_zero(world, spec, batch, 0, optimizer, 2));
  const TensorMap zero = full_parameters(*run_zero(world, spec, batch, stage, optimizer, 2));
  const double gap = max_difference(zero, ddp), scale = std::max(max_magnitude(ddp), 1e-12);
  r.title = std::string(stage_name(stage)) + " against DDP, " + optimizer_class_name(optimizer.kind) + " on cpu:" +
            std::to_string(world) + ", two iterations";
  r.lines.push_back("Parameters put together from the ranks: " + std::to_string(zero.size()) + " of DDP's " +
                    std::to_string(ddp.size()) + ".");
  r.lines.push_back("Largest |difference| from DDP's parameters: " + format_values({gap}, 1) + " (largest parameter " +
                    format_values({scale}, 1) + ").");
  r.facts = {{"max difference", format_values({gap}, 1)}};
  r.answer_value = zero.size() != ddp.size() ? "differs" : gap / scale < 1e-5 ? "same" : "differs";
  return r;
}

}  // namespace dpv::course::detail
