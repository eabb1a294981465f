// Scenario dispatch, parameter validation and the helpers every scenario uses.
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "course/scenario_support.h"
#include "engine/datasets.h"
#include "engine/error.h"
#include "engine/io/checked_json.h"
#include "engine/io/input_file.h"
#include "engine/model.h"

namespace dpv::course {
namespace detail {

ModelSpec scenario_model(const Params& p, const std::string& fallback_preset) {
  if (p.j.contains("model")) return parse_model_spec(p.j.at("model").dump(), "the scenario's model");
  return preset_model(p.text("preset", fallback_preset));
}

Tensor make_input(const Shape& shape, DType dtype, uint64_t seed, double row_ramp) {
  Rng rng(seed);
  const int64_t n = shape.empty() ? 1 : shape[0];
  const int64_t per_row = n ? shape_numel(shape) / n : 0;
  std::vector<double> values(static_cast<size_t>(shape_numel(shape)));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < per_row; ++i) values[static_cast<size_t>(r * per_row + i)] = rng.normal() + row_ramp * double(r);
  return Tensor::from_doubles(shape, dtype, values);
}

Tensor make_targets(int64_t n, int classes, uint64_t seed) {
  Rng rng(seed ^ 0x9e3779b97f4a7c15ULL);
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (auto& v : t) v = rng.randint(std::max(classes, 1));
  return Tensor::from_int64({n}, t);
}

int model_classes(const ModelSpec& spec, const Shape& input_shape) {
  const auto shapes = Model(spec).activation_shapes(input_shape);
  if (shapes.empty() || shapes.back().empty()) return 2;
  return static_cast<int>(shapes.back().back());
}

std::unique_ptr<IterationRun> run_iteration(int devices, const ModelSpec& spec, const Tensor& input, const Tensor& target,
                                            const TrainOptions& options, uint64_t seed, std::optional<StageKind> stop_after) {
  auto run = std::make_unique<IterationRun>();
  run->devices = DeviceSet::create("cpu:" + std::to_string(devices));
  Model model(spec);
  run->initial_state = model.initial_state(seed);
  run->trainer = std::make_unique<Trainer>(run->devices, std::move(model), run->initial_state, options);
  try {
    run->iteration = std::make_unique<Iteration>(*run->trainer, input, target, &run->recorder);
  } catch (const Error& e) {
    run->error = e.full();
    run->error_stage = "construct";
    return run;
  }
  for (const auto& s : run->iteration->plan()) run->plan.push_back(s.kind);
  run->chunks = run->iteration->chunks();
  while (!run->iteration->finished()) {
    const Stage next = run->iteration->plan().at(static_cast<size_t>(run->iteration->next_index()));
    try {
      run->iteration->step();
    } catch (const Error& e) {
      run->error = e.full();
      run->error_stage = next.title.empty() ? stage_kind_name(next.kind) : next.title;
      return run;
    }
    if (stop_after && next.kind == *stop_after) break;
  }
  return run;
}

ModelSpec batchnorm_scenario_model(int features) {
  ModelSpec spec;
  LayerSpec bn;
  bn.kind = LayerKind::BatchNorm1d;
  bn.num_features = features;
  LayerSpec lin;
  lin.kind = LayerKind::Linear;
  lin.in_features = features;
  lin.out_features = 2;
  spec.layers = {bn, lin};
  return spec;
}

std::unique_ptr<DdpRun> run_ddp(int devices, const ModelSpec& spec, const Tensor& input, const Tensor& target,
                                const DdpOptions& options, int iterations, uint64_t seed) {
  auto run = std::make_unique<DdpRun>();
  run->devices = DeviceSet::create("cpu:" + std::to_string(devices));
  Model model(spec);
  run->initial_state = model.initial_state(seed);
  run->trainer = std::make_unique<DdpTrainer>(run->devices, std::move(model), run->initial_state, options);
  for (int i = 0; i < iterations; ++i) {
    const bool last = i + 1 == iterations;
    run->iteration = std::make_unique<DdpIteration>(*run->trainer, input, target, last ? &run->recorder : nullptr);
    run->iteration->run_to_end();
  }
  return run;
}

Tensor take_rows(const Tensor& batch, const std::vector<int64_t>& indices) {
  Shape shape = batch.shape();
  const int64_t per_row = shape[0] ? batch.numel() / shape[0] : 0;
  shape[0] = static_cast<int64_t>(indices.size());
  if (batch.dtype() == DType::Int64) {
    const auto all = batch.to_int64();
    std::vector<int64_t> out;
    for (int64_t i : indices) out.insert(out.end(), all.begin() + i * per_row, all.begin() + (i + 1) * per_row);
    return Tensor::from_int64(shape, out);
  }
  const auto all = batch.to_doubles();
  std::vector<double> out;
  for (int64_t i : indices) out.insert(out.end(), all.begin() + i * per_row, all.begin() + (i + 1) * per_row);
  return Tensor::from_doubles(shape, batch.dtype(), out);
}

double max_difference(const TensorMap& a, const TensorMap& b) {
  double worst = 0;
  for (const auto& [name, x] : a.items()) {
    const Tensor* y = b.find(name);
    if (!y || y->numel() != x.numel()) continue;
    const auto xs = x.to_doubles(), ys = y->to_doubles();
    for (size_t i = 0; i < xs.size(); ++i) worst = std::max(worst, std::fabs(xs[i] - ys[i]));
  }
  return worst;
}

double max_magnitude(const TensorMap& m) {
  double worst = 0;
  for (const auto& [name, x] : m.items())
    for (double v : x.to_doubles()) worst = std::max(worst, std::fabs(v));
  return worst;
}

bool plan_has(const std::vector<StageKind>& plan, StageKind kind) {
  return std::find(plan.begin(), plan.end(), kind) != plan.end();
}

std::string join_ints(const std::vector<int64_t>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    out += i ? sep : "";
    out += std::to_string(v[i]);
  }
  return out;
}

std::string format_values(const std::vector<double>& v, int max_count) {
  std::ostringstream o;
  o.precision(4);
  o << "[";
  for (size_t i = 0; i < v.size() && i < static_cast<size_t>(max_count); ++i) o << (i ? ", " : "") << v[i];
  if (v.size() > static_cast<size_t>(max_count)) o << ", ...";
  o << "]";
  return o.str();
}

}  // namespace detail

namespace {

using detail::json;

enum class Kind { Int, Number, Bool, Text, IntList, Object };

struct Key {
  const char* name;
  Kind kind;
  bool required;
};

struct TypeSpec {
  std::vector<Key> keys;
  std::vector<std::string> asks;  // allowed values of "ask" (empty: no "ask")
  ScenarioResult (*run)(const detail::Params&) = nullptr;
};

const std::map<std::string, TypeSpec>& type_specs() {
  using namespace detail;
  static const std::map<std::string, TypeSpec> specs = {
      {"scatter", {{{"batch", Kind::Int, true}, {"devices", Kind::Int, true}}, {"chunks", "idle", "replicas"}, run_scatter}},
      {"output_shape",
       {{{"devices", Kind::Int, true}, {"input_shape", Kind::IntList, true}, {"view_as", Kind::IntList, false},
         {"model", Kind::Object, false}, {"preset", Kind::Text, false}},
        {},
        run_output_shape}},
      {"dtype_mismatch",
       {{{"devices", Kind::Int, true}, {"input_shape", Kind::IntList, true}, {"view_as", Kind::IntList, false},
         {"input_dtype", Kind::Text, true}, {"model", Kind::Object, false}, {"preset", Kind::Text, false}},
        {},
        run_dtype_mismatch}},
      {"batchnorm",
       {{{"devices", Kind::Int, true}, {"batch", Kind::Int, true}, {"features", Kind::Int, false},
         {"sync_bn", Kind::Bool, false}},
        {"per_device_vs_global", "running_stats_device", "one_sample", "failing_replica"},
        run_batchnorm}},
      {"gradients",
       {{{"devices", Kind::Int, true}, {"batch", Kind::Int, true}, {"model", Kind::Object, false},
         {"preset", Kind::Text, false}},
        {"reduction", "vs_single"},
        run_gradients}},
      {"loss_in_model", {{{"devices", Kind::Int, true}, {"batch", Kind::Int, true}}, {}, run_loss_in_model}},
      {"memory",
       {{{"devices", Kind::Int, true}, {"batch", Kind::Int, true}, {"model", Kind::Object, false},
         {"preset", Kind::Text, false}, {"momentum", Kind::Bool, false}},
        {"peak_device"},
        run_memory}},
      {"plan", {{{"devices", Kind::Int, true}, {"batch", Kind::Int, true}}, {"skipped_stages", "step"}, run_plan}},
      // DistributedDataParallel (in-process ranks) and its DistributedSampler.
      {"sampler",
       {{{"dataset", Kind::Int, true}, {"devices", Kind::Int, true}, {"batch", Kind::Int, false},
         {"rank", Kind::Int, false}, {"drop_last", Kind::Bool, false}},
        {"rank_indices", "counted", "duplicates", "steps_per_epoch"},
        run_sampler}},
      {"ddp_loss",
       {{{"devices", Kind::Int, true}, {"batch", Kind::Int, true}, {"model", Kind::Object, false},
         {"preset", Kind::Text, false}},
        {"printed_loss"},
        run_ddp_loss}},
      {"ddp_gradients",
       {{{"devices", Kind::Int, true}, {"batch", Kind::Int, true}, {"model", Kind::Object, false},
         {"preset", Kind::Text, false}, {"lr", Kind::Number, false}},
        {"reduction", "vs_single", "vs_dp", "matching_step"},
        run_ddp_gradients}},
      {"ddp_buffers",
       {{{"devices", Kind::Int, true}, {"batch", Kind::Int, true}, {"features", Kind::Int, false},
         {"broadcast_buffers", Kind::Bool, false}, {"sync_bn", Kind::Bool, false}},
        {"after_step", "next_forward"},
        run_ddp_buffers}},
      {"ddp_memory",
       {{{"devices", Kind::Int, true}, {"batch", Kind::Int, true}, {"model", Kind::Object, false},
         {"preset", Kind::Text, false}, {"momentum", Kind::Bool, false}},
        {"peak_devices"},
        run_ddp_memory}},
      {"ddp_buckets",
       {{{"devices", Kind::Int, true}, {"batch", Kind::Int, true}, {"model", Kind::Object, false},
         {"preset", Kind::Text, false}},
        {"counts", "why_faster"},
        run_ddp_buckets}},
      {"ddp_resume",
       {{{"devices", Kind::Int, true}, {"batch", Kind::Int, true}, {"steps", Kind::Int, true},
         {"resume_after", Kind::Int, true}, {"optimizer", Kind::Text, false}, {"model", Kind::Object, false},
         {"preset", Kind::Text, false}},
        {"final_weights", "checkpoint_contents"},
        run_ddp_resume}},
      // ZeRO on DDP's ranks: ZeroRedundancyOptimizer (stage 1), FSDP SHARD_GRAD_OP (2), FULL_SHARD (3).
      {"zero_layout",
       {{{"devices", Kind::Int, true}, {"batch", Kind::Int, true}, {"stage", Kind::Int, true},
         {"model", Kind::Object, false}, {"preset", Kind::Text, false}, {"rank", Kind::Int, false},
         {"param", Kind::Text, false}},
        {"owned_count", "owner", "broadcasts", "padding", "shard_numel", "divide"},
        run_zero_layout}},
      {"zero_traffic",
       {{{"devices", Kind::Int, true}, {"batch", Kind::Int, true}, {"stage", Kind::Int, true},
         {"model", Kind::Object, false}, {"preset", Kind::Text, false}},
        {"vs_ddp", "zero3_vs_zero2"},
        run_zero_traffic}},
      {"zero_state",
       {{{"devices", Kind::Int, true}, {"batch", Kind::Int, true}, {"stage", Kind::Int, true},
         {"model", Kind::Object, false}, {"preset", Kind::Text, false}, {"optimizer", Kind::Text, false}},
        {"persistent", "vs_ddp", "padding_state", "grad_shards"},
        run_zero_state}},
      // What the network costs: the alpha-beta all-reduce, a comm hook's bytes.
      {"ddp_network",
       {{{"devices", Kind::Int, true}, {"rate", Kind::Text, true}, {"delay", Kind::Text, false},
         {"bytes", Kind::Int, false}, {"batch", Kind::Int, false}, {"hook", Kind::Text, false},
         {"rank", Kind::Int, false}, {"bucket_cap_mb", Kind::Number, false}, {"model", Kind::Object, false},
         {"preset", Kind::Text, false}},
        {"allreduce_ms", "bound", "messages", "growth", "bytes_ratio", "error_feedback_bytes", "overlap"},
        run_network_cost}},
  };
  return specs;
}

std::string check_params(const TypeSpec& spec, const json& p) {
  for (const auto& key : spec.keys) {
    if (!p.contains(key.name)) {
      if (key.required) return std::string("'") + key.name + "' is missing from params";
      continue;
    }
    const json& v = p.at(key.name);
    const std::string name = std::string("'") + key.name + "'";
    switch (key.kind) {
      case Kind::Int:
        if (!v.is_number_integer()) return name + " must be an integer";
        break;
      case Kind::Number:
        if (!v.is_number()) return name + " must be a number";
        break;
      case Kind::Bool:
        if (!v.is_boolean()) return name + " must be true or false";
        break;
      case Kind::Text:
        if (!v.is_string()) return name + " must be a string";
        break;
      case Kind::Object:
        if (!v.is_object()) return name + " must be an object";
        break;
      case Kind::IntList:
        if (!v.is_array() || v.empty() || !std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number_integer(); }))
          return name + " must be a non-empty list of integers";
        break;
    }
  }
  for (const auto& item : p.items()) {
    if (item.key() == "ask") continue;
    if (std::none_of(spec.keys.begin(), spec.keys.end(), [&](const Key& k) { return item.key() == k.name; }))
      return "unknown parameter '" + item.key() + "'";
  }
  if (!spec.asks.empty()) {
    if (!p.contains("ask") || !p.at("ask").is_string()) return "'ask' (what the scenario answers) is missing";
    const std::string ask = p.at("ask").get<std::string>();
    if (std::find(spec.asks.begin(), spec.asks.end(), ask) == spec.asks.end()) {
      std::string allowed;
      for (const auto& a : spec.asks) {
        allowed += allowed.empty() ? "" : ", ";
        allowed += a;
      }
      return "'ask' is '" + ask + "'; expected one of " + allowed;
    }
  } else if (p.contains("ask")) {
    return "this scenario type takes no 'ask'";
  }
  // Ranges the simulated devices can run in well under a second. Read as int64 (an unsigned JSON
  // integer past int64 is out of range too), so 2^32 + 1 cannot wrap into range as an int would.
  auto outside = [&p](const char* key, int64_t lo, int64_t hi) {
    if (!p.contains(key)) return false;
    const json& v = p.at(key);
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) return true;
    const int64_t x = v.get<int64_t>();
    return x < lo || x > hi;
  };
  if (outside("devices", 1, 8)) return "'devices' must be between 1 and 8";
  if (outside("batch", 1, 512)) return "'batch' must be between 1 and 512";
  if (outside("features", 1, 64)) return "'features' must be between 1 and 64";
  if (outside("dataset", 1, 100000)) return "'dataset' must be between 1 and 100000";
  if (outside("rank", 0, 7)) return "'rank' must be between 0 and 7";
  if (outside("stage", 0, 3)) return "'stage' must be 0 (DDP), 1, 2 or 3 (the ZeRO stage)";
  if (outside("steps", 2, 20)) return "'steps' must be between 2 and 20";
  if (outside("resume_after", 1, 19)) return "'resume_after' must be between 1 and 19";
  if (p.contains("resume_after") && p.contains("steps") && p.at("resume_after").get<int64_t>() >= p.at("steps").get<int64_t>())
    return "'resume_after' must be less than 'steps'";
  if (p.contains("optimizer")) {
    try {
      (void)parse_optimizer_kind(p.at("optimizer").get<std::string>());
    } catch (const Error& e) {
      return std::string("'optimizer': ") + e.what();
    }
  }
  if (p.contains("rank") && p.contains("devices") && p.at("rank").get<int64_t>() >= p.at("devices").get<int64_t>())
    return "'rank' must be less than 'devices'";
  if (p.contains("lr") && !(p.at("lr").get<double>() > 0 && p.at("lr").get<double>() <= 10)) return "'lr' must be in (0, 10]";
  // Shapes: every size at most 4096 (view_as may hold -1) and at most 2^22 elements in all, so a
  // course file cannot ask the app for gigabytes.
  for (const char* key : {"input_shape", "view_as"}) {
    if (!p.contains(key)) continue;
    int64_t elements = 1;
    for (const json& d : p.at(key)) {
      if (d.is_number_unsigned() && d.get<uint64_t>() > 4096) return std::string("'") + key + "' sizes must be at most 4096";
      const int64_t x = d.get<int64_t>();
      if (x < -1 || x > 4096) return std::string("'") + key + "' sizes must be between -1 and 4096, got " + d.dump();
      elements *= x > 0 ? x : 1;
      if (elements > (int64_t{1} << 22)) return std::string("'") + key + "' holds more than 2^22 elements";
    }
  }
  if (p.contains("input_dtype")) {
    try {
      (void)parse_dtype(p.at("input_dtype").get<std::string>());
    } catch (const Error& e) {
      return std::string("'input_dtype': ") + e.what();
    }
  }
  try {
    if (p.contains("model")) (void)parse_model_spec(p.at("model").dump(), "the scenario's model");
    if (p.contains("preset")) (void)preset_model(p.at("preset").get<std::string>());
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

const std::vector<std::string>& scenario_types() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> v;
    for (const auto& [name, spec] : type_specs()) v.push_back(name);
    return v;
  }();
  return types;
}

std::string scenario_problem(const QuizScenario& scenario) {
  auto it = type_specs().find(scenario.type);
  if (it == type_specs().end()) {
    std::string known;
    for (const auto& t : scenario_types()) {
      known += known.empty() ? "" : ", ";
      known += t;
    }
    return "unknown type '" + scenario.type + "'; expected one of " + known;
  }
  json p;
  try {
    p = parse_json(scenario.params_json.empty() ? "{}" : scenario.params_json, "params", kQuizInput.max_bytes);
  } catch (const Error& e) {
    return e.what();
  }
  if (!p.is_object()) return "params must be an object";
  return check_params(it->second, p);
}

ScenarioResult run_scenario(const QuizScenario& scenario) {
  ScenarioResult result;
  result.title = "Scenario '" + scenario.type + "'";
  if (const std::string problem = scenario_problem(scenario); !problem.empty()) {
    result.failed = true;
    result.lines.push_back("This scenario cannot run: " + problem);
    return result;
  }
  try {
    return type_specs().at(scenario.type).run(detail::Params{parse_json(scenario.params_json.empty() ? "{}" : scenario.params_json, "params", kQuizInput.max_bytes)});
  } catch (const Error& e) {
    result.failed = true;
    result.lines.push_back("The engine stopped the scenario: " + e.full());
  } catch (const std::exception& e) {
    result.failed = true;
    result.lines.push_back(std::string("The scenario failed: ") + e.what());
  }
  return result;
}

ScenarioResult run_question_scenario(const QuizQuestion& question) {
  if (!question.scenario) {
    ScenarioResult r;
    r.failed = true;
    r.title = "No scenario";
    r.lines.push_back("Question '" + question.id + "' has nothing the engine can run.");
    return r;
  }
  ScenarioResult r = run_scenario(*question.scenario);
  if (!r.failed && !r.answer_value.empty()) {
    for (const auto& o : question.options)
      if (!o.value.empty() && o.value == r.answer_value) r.answer_label = o.label;
    r.answer_line = static_cast<int>(r.lines.size());
    if (!r.answer_label.empty())
      r.lines.push_back("The engine's result matches option " + r.answer_label + ".");
    else
      r.lines.push_back("The engine's result (" + r.answer_value + ") matches none of the options.");
  }
  return r;
}

}  // namespace dpv::course
