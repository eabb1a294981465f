// `dpv bench memory`: each rank's memory under DDP, ZeRO-1, ZeRO-2 and ZeRO-3 on the same model,
// devices, batch and optimizer (course/zero_memory.h compare_memory), by kind at its peak and
// between iterations, next to the standard formula, with rank 0's differences explained line by
// line; optionally each strategy's step time (best of three rounds, engine/step_timing.h). A
// benchmark: figures only, no pass/fail.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flag_errors.h"
#include "cli/format.h"
#include "cli/int_options.h"
#include "cli/optimizer_options.h"
#include "cli/output_paths.h"
#include "cli/size_checks.h"
#include "cli/stage_totals.h"
#include "course/zero_memory.h"
#include "engine/ddp/ddp.h"
#include "engine/io/atomic_file.h"
#include "engine/model.h"
#include "engine/model_data.h"
#include "engine/step_timing.h"

namespace dpv::cli {
namespace {

struct MemoryBenchOptions {
  RunSpec run;              // preset, devices, batch (0: the preset's), optimizer, seed
  int timing_iters = 0;     // 0: no step times
  std::string json;
};

// The parts of a breakdown in table and JSON order (activations include the rank's output).
struct Part {
  const char* name;
  int64_t MemoryBreakdown::*field;
};
constexpr Part kParts[] = {{"batch", &MemoryBreakdown::batch},           {"parameters", &MemoryBreakdown::parameters},
                           {"gradients", &MemoryBreakdown::gradients},   {"optimizer", &MemoryBreakdown::optimizer},
                           {"buckets", &MemoryBreakdown::buckets},       {"gathered", &MemoryBreakdown::gathered},
                           {"activations", &MemoryBreakdown::activations}, {"output", &MemoryBreakdown::output},
                           {"other", &MemoryBreakdown::other}};

nlohmann::ordered_json parts_json(const MemoryBreakdown& m) {
  nlohmann::ordered_json j;
  for (const Part& p : kParts) j[p.name] = m.*p.field;
  j["total"] = m.total();
  j["model_state"] = course::model_state_bytes(m);
  return j;
}

// One strategy's step time: seconds per step (best round) and, from observed iterations after
// the timed ones, the milliseconds per step of each stage kind.
struct StrategyTime {
  double seconds = 0;
  std::vector<std::pair<std::string, double>> stage_ms;  // stage kind name, ms per step (plan order)
};

// Seconds per step of each strategy on the comparison's model, devices and batch: warm-up, then
// the best of three rounds (the same timing `dpv bench` gives DDP); then as many observed
// iterations for the time per stage, so the observer does not slow the timed ones.
std::vector<StrategyTime> time_strategies(const course::MemoryComparison& c, int iters) {
  const ModelSpec spec = c.run.model_spec();
  const Dataset data = make_data_for_model(spec, c.batch, c.run.seed + 1);
  const TensorMap state = Model(spec).initial_state(c.run.seed);
  StepTiming timing;
  timing.warmup = 2;  // construction, then DDP's bucket rebuild
  timing.rounds = std::min(3, iters);
  timing.per_round = std::max(1, iters / timing.rounds);
  std::vector<StrategyTime> times;
  for (const course::StrategyMemory& s : c.strategies) {
    RunSpec run = c.run;
    run.strategy = s.strategy;
    const std::unique_ptr<Strategy> strategy = make_strategy(run, DeviceSet::create(run.devices), &state);
    auto* trainer = dynamic_cast<DdpTrainer*>(strategy.get());
    check(trainer != nullptr, std::string(strategy_name(s.strategy)) + " was built without DDP's ranks");
    StrategyTime t;
    t.seconds = time_ddp_steps(*trainer, data.inputs, data.targets, timing);
    StageTotals stages;
    for (int i = 0; i < iters; ++i) DdpIteration(*trainer, data.inputs, data.targets, &stages).run_to_end();
    for (const course::MemorySample& sample : s.samples) {
      const std::string name = stage_kind_name(sample.stage.kind);
      const bool listed = std::any_of(t.stage_ms.begin(), t.stage_ms.end(), [&](const auto& p) { return p.first == name; });
      if (!listed) t.stage_ms.emplace_back(name, 1e3 * stages.seconds[static_cast<size_t>(sample.stage.kind)] / iters);
    }
    times.push_back(std::move(t));
  }
  return times;
}

void print_header(const course::MemoryComparison& c) {
  const course::MemoryFormula& f = c.formula;
  std::cout << strf("dpv bench memory: %s on %s, global batch %lld, %s; Ψ = %lld parameters (L = %lld padded "
                    "for W = %d), %g bytes each; bytes per rank at stage boundaries\n",
                    c.run.model ? "model" : c.run.preset.c_str(), c.run.devices.c_str(),
                    static_cast<long long>(c.batch), optimizer_class_name(c.run.optimizer.kind),
                    static_cast<long long>(c.parameters), static_cast<long long>(c.flat.padded_numel), c.world,
                    f.param_bytes);
  std::cout << strf("formula per rank (p + g + K with p = g = %g, K = %g; mixed precision 2 + 2 + %g):\n",
                    f.param_bytes, f.optimizer_bytes, f.mixed_optimizer_bytes);
  std::cout << strf("%-8s %12s %12s\n", "", "float", "mixed");
  for (const course::StrategyMemory& s : c.strategies)
    std::cout << strf("%-8s %12.0f %12.0f\n", strategy_short_name(s.strategy), f.for_strategy(s.strategy),
                      f.mixed_for_strategy(s.strategy));
}

void print_strategy(const course::MemoryComparison& c, const course::StrategyMemory& s, const StrategyTime& time) {
  std::cout << "\n" << strategy_short_name(s.strategy) << " (" << strategy_name(s.strategy) << ")";
  if (time.seconds > 0) std::cout << strf(", %.3f ms/step", 1e3 * time.seconds);
  std::cout << "\n";
  if (!time.stage_ms.empty()) {
    std::cout << "  ms per step by stage:";
    for (const auto& [name, ms] : time.stage_ms) std::cout << strf(" %s %.3f", name.c_str(), ms);
    std::cout << "\n";
  }
  std::cout
            << strf("%4s %-10s %10s", "rank", "point", "total");
  for (const Part& p : kParts) std::cout << strf(" %11s", p.name);
  std::cout << strf(" %11s %11s  %s\n", "model state", "formula", "stage");
  const double formula = c.formula.for_strategy(s.strategy);
  for (size_t r = 0; r < s.persistent.size(); ++r)
    for (bool peak : {true, false}) {
      const MemoryBreakdown& m = peak ? s.at_peak[r] : s.persistent[r];
      std::cout << strf("%4zu %-10s %10lld", r, peak ? "peak" : "persistent", static_cast<long long>(m.total()));
      for (const Part& p : kParts) std::cout << strf(" %11lld", static_cast<long long>(m.*p.field));
      const std::string stage = peak ? s.samples.at(static_cast<size_t>(s.peak_sample[r])).stage.title : "after the iteration";
      std::cout << strf(" %11lld %11.0f  %s\n", static_cast<long long>(course::model_state_bytes(m)), formula,
                        stage.c_str());
    }
  for (bool peak : {false, true}) {
    std::cout << "  rank 0 " << (peak ? "at its peak" : "between iterations") << " against the formula:\n";
    for (const course::MemoryDifference& d : c.differences)
      if (d.strategy == s.strategy && d.at_peak == peak)
        std::cout << strf("    %+9lld %-11s %s%s\n", static_cast<long long>(d.bytes),
                          d.other ? "other" : memory_kind_name(d.kind), d.explained ? "" : "NOT EXPLAINED: ",
                          d.why.c_str());
  }
}

nlohmann::ordered_json strategy_json(const course::MemoryComparison& c, const course::StrategyMemory& s,
                                     const StrategyTime& time) {
  nlohmann::ordered_json j;
  j["strategy"] = strategy_short_name(s.strategy);
  j["name"] = strategy_name(s.strategy);
  j["zero_stage"] = zero_stage(s.strategy);
  j["formula_bytes"] = c.formula.for_strategy(s.strategy);
  j["mixed_formula_bytes"] = c.formula.mixed_for_strategy(s.strategy);
  if (time.seconds > 0) {
    j["ms_per_step"] = 1e3 * time.seconds;
    nlohmann::ordered_json stages = nlohmann::ordered_json::object();
    for (const auto& [name, ms] : time.stage_ms) stages[name] = ms;
    j["stage_ms_per_step"] = stages;
  }
  j["ranks"] = nlohmann::ordered_json::array();
  for (size_t r = 0; r < s.persistent.size(); ++r)
    j["ranks"].push_back({{"rank", r},
                          {"peak", parts_json(s.at_peak[r])},
                          {"peak_stage", s.samples.at(static_cast<size_t>(s.peak_sample[r])).stage.title},
                          {"persistent", parts_json(s.persistent[r])}});
  j["stages"] = nlohmann::ordered_json::array();  // every rank after every stage of the measured iteration
  for (const course::MemorySample& sample : s.samples) {
    nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
    for (const MemoryBreakdown& m : sample.ranks) ranks.push_back(parts_json(m));
    j["stages"].push_back({{"kind", stage_kind_name(sample.stage.kind)}, {"title", sample.stage.title}, {"ranks", ranks}});
  }
  j["differences"] = nlohmann::ordered_json::array();
  for (const course::MemoryDifference& d : c.differences)
    if (d.strategy == s.strategy)
      j["differences"].push_back({{"rank", 0},
                                  {"point", d.at_peak ? "peak" : "persistent"},
                                  {"kind", d.other ? "other" : memory_kind_name(d.kind)},
                                  {"bytes", d.bytes},
                                  {"explained", d.explained},
                                  {"why", d.why}});
  return j;
}

nlohmann::ordered_json comparison_json(const course::MemoryComparison& c, const std::vector<StrategyTime>& times) {
  nlohmann::ordered_json j;
  j["model"] = c.run.model ? "model" : c.run.preset;
  j["devices"] = c.run.devices;
  j["world"] = c.world;
  j["batch"] = c.batch;
  j["optimizer"] = optimizer_name(c.run.optimizer.kind);
  j["seed"] = c.run.seed;
  j["parameters"] = c.parameters;
  j["padded_parameters"] = c.flat.padded_numel;
  j["buffer_bytes"] = c.buffer_bytes;
  const course::MemoryFormula& f = c.formula;
  j["formula"] = {{"param_bytes", f.param_bytes},
                  {"grad_bytes", f.grad_bytes},
                  {"optimizer_bytes", f.optimizer_bytes},
                  {"mixed_optimizer_bytes", f.mixed_optimizer_bytes}};
  j["strategies"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < c.strategies.size(); ++i)
    j["strategies"].push_back(strategy_json(c, c.strategies[i], i < times.size() ? times[i] : StrategyTime{}));
  return j;
}

void run_memory_bench(MemoryBenchOptions o) {
  if (!o.json.empty()) check_output_path(o.json, "--json");
  const ModelSpec spec = with_flag("--preset", [&] { return o.run.model_spec(); });
  const int devices = devices_from_flag(o.run.devices)->size();
  const bool batch_given = o.run.batch > 0;
  if (!batch_given) o.run.batch = default_batch(o.run.preset);
  check_step_bytes(spec, o.run.batch, devices, "--preset " + o.run.preset,
                   batch_given ? "--batch " + std::to_string(o.run.batch)
                               : "the preset's batch of " + std::to_string(o.run.batch));
  const course::MemoryComparison c = course::compare_memory(o.run);
  const std::vector<StrategyTime> times =
      o.timing_iters > 0 ? time_strategies(c, o.timing_iters) : std::vector<StrategyTime>(c.strategies.size());
  print_header(c);
  for (size_t i = 0; i < c.strategies.size(); ++i) print_strategy(c, c.strategies[i], times.at(i));
  if (!o.json.empty()) {
    write_file_atomic(o.json, comparison_json(c, times).dump(1) + "\n");
    std::cout << "JSON -> " << o.json << "\n";
  }
}

}  // namespace

void add_bench_memory_command(CLI::App* bench, Action& run) {
  auto o = std::make_shared<MemoryBenchOptions>();
  o->run.devices = "cpu:2";
  auto* sub = bench->add_subcommand(
      "memory", "Each rank's memory under DDP, ZeRO-1, ZeRO-2 and ZeRO-3, by kind, against the standard formula");
  std::string presets;
  for (const auto& p : preset_names()) presets += (presets.empty() ? "" : ", ") + p;
  sub->add_option("--preset", o->run.preset, "Model preset: " + presets)->capture_default_str();
  sub->add_option("--devices", o->run.devices, "Device spec: one rank per device (cpu:W)")->capture_default_str();
  sub->add_option("--batch", o->run.batch, "Global batch (default: the preset's)")->transform(integer_in<int64_t>(1));
  const auto finish_optimizer = add_optimizer_options(sub, o->run.optimizer);
  sub->add_option("--seed", o->run.seed, "Seed for weights and data")->capture_default_str()->transform(integer_in<uint64_t>());
  sub->add_option("--timing-iters", o->timing_iters, "Also time each strategy's step over this many iterations (0: no)")
      ->capture_default_str()
      ->transform(integer_in<int>(0, 100000));
  sub->add_option("--json", o->json, "Write the figures as JSON (atomically)");
  sub->callback([o, finish_optimizer, &run] {
    finish_optimizer();
    run = [o] { run_memory_bench(*o); };
  });
}

}  // namespace dpv::cli
