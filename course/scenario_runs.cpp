// Scenarios about the shape of one DataParallel iteration: scatter sizes, the gathered output,
// dtype errors, gradient reduction, where memory peaks, which stages a plan holds.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "course/scenario_support.h"
#include "engine/error.h"
#include "engine/model.h"

namespace dpv::course::detail {

namespace {

// Resolves a view shape with one -1 against the input's element count, like Tensor.view.
Shape resolve_view(const Shape& input, const std::vector<int64_t>& view) {
  Shape out(view.begin(), view.end());
  const int64_t total = shape_numel(input);
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      check(infer < 0, "view_as: only one dimension can be inferred", ErrorClass::ValueError);
      infer = static_cast<int>(i);
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0) {
    check(known > 0 && total % known == 0, "view_as " + shape_str(view) + " is invalid for input of size " + std::to_string(total));
    out[static_cast<size_t>(infer)] = total / known;
  }
  check(shape_numel(out) == total, "shape " + shape_str(out) + " is invalid for input of size " + std::to_string(total));
  return out;
}

// The input a scenario describes: input_shape, then viewed as view_as if given.
Tensor scenario_input(const Params& p, DType dtype, uint64_t seed, std::string* note) {
  const Shape shape = p.ints("input_shape");
  Tensor x = make_input(shape, dtype, seed);
  if (p.j.contains("view_as")) {
    const Shape view = resolve_view(shape, p.ints("view_as"));
    x = x.reshape(view);
    if (note) *note = "input " + shape_str(shape) + " viewed as " + shape_str(view);
  } else if (note) {
    *note = "input " + shape_str(shape);
  }
  return x;
}

std::string device_list(const std::vector<int>& devices) {
  if (devices.empty()) return "none";
  std::string out;
  for (size_t i = 0; i < devices.size(); ++i) {
    out += i ? "," : "";
    out += std::to_string(devices[i]);
  }
  return out;
}

const StageEvent* find_event(const Recorder& r, StageKind kind) {
  for (const auto& e : r.events)
    if (e.stage.kind == kind) return &e;
  return nullptr;
}

std::string stage_names(const std::vector<StageKind>& plan) {
  std::string out;
  StageKind last{};
  for (size_t i = 0; i < plan.size(); ++i) {
    if (i && plan[i] == last) continue;  // Forward/Backward repeat once per layer
    out += out.empty() ? "" : ", ";
    out += stage_kind_name(plan[i]);
    last = plan[i];
  }
  return out;
}

// These scenarios feed rows of features: the model must start with a Linear layer.
int64_t first_linear_inputs(const ModelSpec& spec) {
  check(!spec.layers.empty() && spec.layers.front().kind == LayerKind::Linear,
        "this scenario needs a model whose first layer is linear (it feeds rows of features)", ErrorClass::ValueError);
  return spec.layers.front().in_features;
}

}  // namespace

ScenarioResult run_scatter(const Params& p) {
  const int batch = p.integer("batch"), k = p.integer("devices");
  const std::string ask = p.text("ask");
  ScenarioResult r;
  r.title = "Scatter a batch of " + std::to_string(batch) + " over " + std::to_string(k) + " simulated devices (cpu:" +
            std::to_string(k) + ")";
  const ModelSpec spec = preset_model("simple");  // the source document's Linear(10, 2)
  auto run = run_iteration(k, spec, make_input({batch, 10}, spec.dtype, 1), make_targets(batch, 2, 1), TrainOptions{});
  if (!run->error.empty()) throw Error("the iteration failed at " + run->error_stage + ": " + run->error);
  const StageEvent* scatter = find_event(run->recorder, StageKind::Scatter);
  check(scatter != nullptr, "the engine's plan has no Scatter stage");
  const std::vector<int64_t> chunks = scatter->chunk_sizes.empty() ? run->chunks : scatter->chunk_sizes;
  std::vector<int> idle;
  for (int d = 0; d < k; ++d) {
    int64_t rows = d < static_cast<int>(chunks.size()) ? chunks[static_cast<size_t>(d)] : 0;
    for (const auto& dev : scatter->devices)
      if (dev.device == d) rows = dev.chunk_rows;
    if (rows == 0) idle.push_back(d);
  }
  r.lines.push_back("The engine's Scatter stage split the " + std::to_string(batch) + " rows into chunks of " +
                    join_ints(chunks, ", ") + ".");
  r.lines.push_back("torch.chunk uses ceil(" + std::to_string(batch) + "/" + std::to_string(k) + ") = " +
                    std::to_string((batch + k - 1) / k) + " row(s) per chunk; the last chunk takes what is left.");
  const auto rule = dpv::chunk_sizes(batch, k);
  r.lines.push_back(std::string("dpv::chunk_sizes gives ") + join_ints(rule, ", ") +
                    (rule == chunks ? ": the same." : ": DIFFERENT from the Scatter stage."));
  r.lines.push_back(std::to_string(run->iteration->replicas()) + " replica(s) ran; idle devices: " + device_list(idle) + ".");
  r.facts = {{"chunks", join_ints(chunks, ", ")},
             {"replicas", std::to_string(run->iteration->replicas())},
             {"idle devices", device_list(idle)}};
  if (ask == "chunks") r.answer_value = join_ints(chunks);
  else if (ask == "idle") r.answer_value = device_list(idle);
  else r.answer_value = std::to_string(run->iteration->replicas());
  return r;
}

ScenarioResult run_output_shape(const Params& p) {
  const int k = p.integer("devices");
  const ModelSpec spec = scenario_model(p, "simple");
  std::string note;
  const Tensor x = scenario_input(p, spec.dtype, 3, &note);
  ScenarioResult r;
  r.title = "Forward " + note + " through " + Model(spec).describe_short() + " on cpu:" + std::to_string(k);
  // A model that does not fit the input fails already when its output shape is worked out; that
  // is the same error the iteration would raise, so it is reported the same way.
  std::unique_ptr<IterationRun> run;
  try {
    run = run_iteration(k, spec, x, make_targets(x.dim(0), model_classes(spec, x.shape()), 3), TrainOptions{});
  } catch (const Error& e) {
    run = std::make_unique<IterationRun>();
    run->error = e.full();
    run->error_stage = "construct";
  }
  if (!run->error.empty()) {
    r.lines.push_back("The engine raised an error at " + run->error_stage + ":");
    r.lines.push_back(run->error);
    r.facts = {{"error", run->error}};
    r.answer_value = "error";
    return r;
  }
  const Shape out = run->iteration->output().shape();
  const Model model(spec);
  for (size_t d = 0; d < run->chunks.size(); ++d) {
    Shape chunk_shape = x.shape();
    chunk_shape[0] = run->chunks[d];
    r.lines.push_back("Replica " + std::to_string(d) + " on device " + std::to_string(d) + ": input chunk " +
                      shape_str(chunk_shape) + " -> output " + shape_str(model.activation_shapes(chunk_shape).back()));
  }
  r.lines.push_back(plan_has(run->plan, StageKind::Gather)
                        ? "Gather concatenated the replicas' outputs on device 0: " + shape_str(out) + "."
                        : "One replica: no gather; the output stays as the module returned it: " + shape_str(out) + ".");
  r.lines.push_back("print(output.shape) -> " + torch_size_str(out));
  r.facts = {{"chunks", join_ints(run->chunks, ", ")},
             {"output shape", shape_str(out)},
             {"output device", std::to_string(run->iteration->output().device_index())}};
  r.answer_value = shape_str(out);
  return r;
}

ScenarioResult run_dtype_mismatch(const Params& p) {
  const int k = p.integer("devices");
  const ModelSpec spec = scenario_model(p, "simple");
  const DType wrong = parse_dtype(p.text("input_dtype"));
  std::string note;
  const Tensor bad = scenario_input(p, wrong, 5, &note);
  const Tensor good = scenario_input(p, spec.dtype, 5, nullptr);
  const int classes = model_classes(spec, good.shape());
  const Tensor target = make_targets(bad.dim(0), classes, 5);
  ScenarioResult r;
  r.title = std::string("A ") + dtype_name(wrong) + " " + note + " into a " + dtype_name(spec.dtype) + " model on cpu:" +
            std::to_string(k);
  auto failing = run_iteration(k, spec, bad, target, TrainOptions{});
  auto matched = run_iteration(k, spec, good, target, TrainOptions{});
  // The same wrong dtype with a batch of 2: rules out the batch size as the cause.
  const Tensor small = bad.slice0(0, std::min<int64_t>(2, bad.dim(0))).clone();
  auto small_run = run_iteration(k, spec, small, target.slice0(0, small.dim(0)).clone(), TrainOptions{});
  if (failing->error.empty()) {
    r.lines.push_back("The engine accepted the input: no error.");
    r.answer_value = "none";
  } else {
    r.lines.push_back("The engine's error:");
    r.lines.push_back(failing->error);
    r.lines.push_back(std::string("Same values as ") + dtype_name(spec.dtype) + ": " +
                      (matched->error.empty() ? "the iteration runs through." : "fails too: " + matched->error));
    r.lines.push_back(std::string("Still ") + dtype_name(wrong) + ", batch of only " + std::to_string(small.dim(0)) + ": " +
                      (small_run->error.empty() ? "runs." : "the same kind of error."));
    const bool dtype_is_cause = matched->error.empty() && !small_run->error.empty();
    r.answer_value = dtype_is_cause ? "dtype" : "other";
    r.facts = {{"error", failing->error}, {"model dtype", dtype_name(spec.dtype)}, {"input dtype", dtype_name(wrong)}};
  }
  return r;
}

ScenarioResult run_gradients(const Params& p) {
  const int k = p.integer("devices"), batch = p.integer("batch");
  const std::string ask = p.text("ask");
  const ModelSpec spec = scenario_model(p, "simple");
  const Shape in_shape = {batch, first_linear_inputs(spec)};
  const Tensor x = make_input(in_shape, spec.dtype, 11);
  const Tensor t = make_targets(batch, model_classes(spec, in_shape), 11);
  auto dp = run_iteration(k, spec, x, t, TrainOptions{});
  auto single = run_iteration(1, spec, x, t, TrainOptions{});
  if (!dp->error.empty()) throw Error(dp->error);
  if (!single->error.empty()) throw Error(single->error);
  // Least-squares ratio of the DataParallel gradient to the one-device full-batch gradient.
  double dot = 0, norm = 0;
  int grad_device = -1;
  for (const auto& [name, g] : dp->trainer->grads().items()) {
    const Tensor* ref = single->trainer->grads().find(name);
    check(ref != nullptr, "the single-device run has no gradient for " + name);
    const auto a = g.to_doubles(), b = ref->to_doubles();
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) dot += a[i] * b[i], norm += b[i] * b[i];
    grad_device = g.device_index();
  }
  check(norm > 0, "the reference gradient is zero; pick another batch");
  const double ratio = dot / norm;
  ScenarioResult r;
  r.title = "Gradients of one step, batch " + std::to_string(batch) + " on cpu:" + std::to_string(k) +
            " versus one device with the whole batch";
  r.lines.push_back("Chunks: " + join_ints(dp->chunks, ", ") + "; the loss is the mean over the gathered batch of " +
                    std::to_string(batch) + ", so each replica's gradient already carries 1/" + std::to_string(batch) + ".");
  const StageEvent* reduce = find_event(dp->recorder, StageKind::ReduceGrads);
  if (reduce && !reduce->collectives.empty())
    r.lines.push_back("ReduceGrads ran '" + std::string(collective_op_name(reduce->collectives.front().op)) + "' over " +
                      std::to_string(reduce->collectives.front().ranks) + " devices.");
  r.lines.push_back("Reduced gradient / single-device gradient = " + std::to_string(ratio) + " (1 means summed; 1/" +
                    std::to_string(k) + " would mean averaged).");
  r.lines.push_back("The reduced gradients live on device " + std::to_string(grad_device) + ", beside the original parameters.");
  const auto near = [](double a, double b) { return std::fabs(a - b) < 1e-3 * std::max(1.0, std::fabs(b)); };
  std::string how = near(ratio, 1.0) ? "sum" : near(ratio, 1.0 / k) ? "mean" : near(ratio, double(k)) ? "k_times" : "other";
  r.facts = {{"ratio to single device", std::to_string(ratio)}, {"gradient device", std::to_string(grad_device)}};
  if (ask == "reduction") r.answer_value = how + "@" + std::to_string(grad_device);
  else r.answer_value = how == "sum" ? "same" : how == "mean" ? "1/k" : how == "k_times" ? "k" : "other";
  return r;
}

ScenarioResult run_loss_in_model(const Params& p) {
  const int k = p.integer("devices"), batch = p.integer("batch");
  const ModelSpec spec = preset_model("simple");
  auto run = run_iteration(k, spec, make_input({batch, 10}, spec.dtype, 13), make_targets(batch, 2, 13), TrainOptions{});
  if (!run->error.empty()) throw Error(run->error);
  const bool gathers = plan_has(run->plan, StageKind::Gather);
  const int replicas = run->iteration->replicas();
  ScenarioResult r;
  r.title = "A loss computed inside the model: batch " + std::to_string(batch) + " on cpu:" + std::to_string(k);
  r.lines.push_back("The engine's plan: " + stage_names(run->plan) + ".");
  r.lines.push_back("Replicas: " + std::to_string(replicas) + " (chunks " + join_ints(run->chunks, ", ") + ").");
  if (gathers) {
    r.lines.push_back("Each replica would return a 0-dim loss; Gather sees only scalars, unsqueezes each to [1] and");
    r.lines.push_back("concatenates them on device 0 (with PyTorch's warning), one entry per replica.");
    r.answer_value = "[" + std::to_string(replicas) + "]";
  } else {
    r.lines.push_back("There is no Gather stage: the module's return value comes back untouched, so a 0-dim loss stays 0-dim.");
    r.answer_value = "[]";
  }
  r.lines.push_back("loss.shape -> torch.Size(" + r.answer_value + ")");
  r.facts = {{"replicas", std::to_string(replicas)}, {"gather stage", gathers ? "yes" : "no"}, {"loss shape", r.answer_value}};
  return r;
}

ScenarioResult run_memory(const Params& p) {
  const int k = p.integer("devices"), batch = p.integer("batch");
  const ModelSpec spec = scenario_model(p, "mnist-mlp");
  const Shape in_shape = {batch, first_linear_inputs(spec)};
  TrainOptions opt;
  if (p.flag("momentum", true)) opt.optimizer.momentum = 0.9;
  auto run = run_iteration(k, spec, make_input(in_shape, spec.dtype, 17),
                           make_targets(batch, model_classes(spec, in_shape), 17), opt);
  if (!run->error.empty()) throw Error(run->error);
  std::vector<int64_t> peak(static_cast<size_t>(k), 0);
  for (const auto& e : run->recorder.events)
    for (const auto& d : e.devices)
      if (d.device >= 0 && d.device < k)
        peak[static_cast<size_t>(d.device)] = std::max({peak[static_cast<size_t>(d.device)], d.memory_peak, d.memory_bytes});
  const int top = static_cast<int>(std::max_element(peak.begin(), peak.end()) - peak.begin());
  ScenarioResult r;
  r.title = "Memory per device over one iteration, batch " + std::to_string(batch) + " on cpu:" + std::to_string(k) +
            (opt.optimizer.momentum > 0 ? ", SGD with momentum" : "");
  for (int d = 0; d < k; ++d) {
    r.lines.push_back("Device " + std::to_string(d) + ": peak " + std::to_string(peak[static_cast<size_t>(d)] / 1024) + " KiB");
    r.facts.push_back({"device " + std::to_string(d) + " peak bytes", std::to_string(peak[static_cast<size_t>(d)])});
  }
  r.lines.push_back("Device " + std::to_string(top) +
                    " peaks highest: it holds the original parameters, the gathered output, the loss, the reduced "
                    "gradients and the optimizer state on top of its own chunk.");
  r.answer_value = std::to_string(top);
  return r;
}

ScenarioResult run_plan(const Params& p) {
  const int k = p.integer("devices"), batch = p.integer("batch");
  const std::string ask = p.text("ask");
  const ModelSpec spec = preset_model("simple");
  const Tensor x = make_input({batch, 10}, spec.dtype, 19);
  const Tensor t = make_targets(batch, 2, 19);
  auto run = run_iteration(k, spec, x, t, TrainOptions{});
  if (!run->error.empty()) throw Error(run->error);
  ScenarioResult r;
  r.title = "The engine's plan for batch " + std::to_string(batch) + " on cpu:" + std::to_string(k);
  r.lines.push_back("Stages: " + stage_names(run->plan) + ".");
  if (ask == "skipped_stages") {
    // Compare with two devices, where every stage of DataParallel is present.
    auto full = run_iteration(2, spec, x, t, TrainOptions{});
    if (!full->error.empty()) throw Error(full->error);
    r.lines.push_back("With cpu:2 the plan is: " + stage_names(full->plan) + ".");
    std::string skipped;
    StageKind last{};
    bool first = true;
    for (StageKind s : full->plan) {
      if (!first && s == last) continue;
      first = false;
      last = s;
      if (!plan_has(run->plan, s)) {
        skipped += skipped.empty() ? "" : ",";
        skipped += stage_kind_name(s);
      }
    }
    r.answer_value = skipped.empty() ? "none" : skipped;
    r.lines.push_back("Missing on cpu:" + std::to_string(k) + ": " + r.answer_value + ".");
  } else {
    const int steps = static_cast<int>(std::count(run->plan.begin(), run->plan.end(), StageKind::Step));
    int device = -1;
    for (const auto& [name, tensor] : run->trainer->state().items()) device = tensor.device_index();
    r.lines.push_back("Step stages in the plan: " + std::to_string(steps) + "; the parameters it updates live on device " +
                      std::to_string(device) + ".");
    r.answer_value = std::to_string(steps) + "@" + std::to_string(device);
  }
  r.facts = {{"stages", stage_names(run->plan)}};
  return r;
}

}  // namespace dpv::course::detail
