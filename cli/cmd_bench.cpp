// `dpv bench`: throughput of training steps, one device versus DataParallel versus
// DistributedDataParallel (same model, same global batch) on several devices, for the
// preset models at their usual batch sizes; where the time goes (per-stage totals); and for the
// large MLP the engine's achieved GEMM rate against its GEMM library's own rate on the same GEMMs
// (the faster of OpenBLAS and oneDNN alone on each shape; each alone beside it), and per model the
// library the engine chose for each of its products' shapes.
// Benchmarks print figures; nothing here is a pass/fail check.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/bench_gemm.h"
#include "cli/commands.h"
#include "cli/flag_errors.h"
#include "cli/int_options.h"
#include "cli/format.h"
#include "course/gemm_reference.h"
#include "cli/handoff_latency.h"
#include "course/machine_reference.h"
#include "engine/free_cores.h"
#include "cli/output_paths.h"
#include "cli/stage_totals.h"
#include "cli/validators.h"
#include "engine/backend_registry.h"
#include "engine/data_parallel.h"
#include "engine/ddp/ddp.h"
#include "engine/device.h"
#include "engine/io/atomic_file.h"
#include "engine/model.h"
#include "engine/model_data.h"
#include "engine/step_timing.h"

namespace dpv::cli {
namespace {

using course::machine_reference_shapes;
using course::MachineReference;
using course::measure_machine_reference;

struct BenchOptions {
  std::vector<std::string> devices;  // empty: cpu:1 cpu:2 cpu:4 (or the GPUs)
  std::vector<std::string> models{"simple", "mnist-mlp", "mlp-large", "cnn"};
  int iters = 30, warmup = 3, stage_iters = 15;  // iters: timed, in three rounds (the best one counts)
  std::string json;
  uint64_t seed = 0;
  bool ddp = true;  // also DistributedDataParallel on every multi-device set
  bool machine_reference = true;  // the machine's own K-worker GEMM speed-up beside every cpu:K row
};

struct Measurement {
  std::string model, devices;
  int64_t batch = 0;
  int device_count = 0;
  std::vector<int64_t> chunks;
  double seconds_per_step = 0;
  StageTotals stages;  // over stage_iters iterations
  int stage_iters = 0;
  bool cpu = true;  // CPU devices: the engine's CPU backend multiplies
  BenchGemm gemm;   // with a GEMM reference: the step's GEMMs against each library alone
};

// Best of up to three rounds of o.iters steps in all (engine/step_timing.h, as the app's DP-vs-DDP
// page times its speed-up sweep), after o.warmup steps.
StepTiming bench_timing(const BenchOptions& o) {
  StepTiming t;
  t.warmup = o.warmup;
  t.rounds = std::min(3, o.iters);
  t.per_round = std::max(1, o.iters / t.rounds);
  return t;
}

std::vector<std::string> default_devices() {
  if (cuda_available()) {
    std::vector<std::string> d{"cuda:0"};
    if (DeviceSet::create("cuda")->size() > 1) d.push_back("cuda");
    return d;
  }
  return {"cpu:1", "cpu:2", "cpu:4"};
}

Measurement measure(const std::string& preset, const std::string& device_spec, const BenchOptions& o,
                    bool gemm_reference) {
  Measurement m;
  m.model = preset;
  m.devices = device_spec;
  ModelSpec spec = preset_model(preset);
  m.batch = default_batch(preset);
  Dataset data = make_data_for_model(spec, m.batch, o.seed + 1);
  auto devices = DeviceSet::create(device_spec);
  m.device_count = devices->size();
  m.cpu = (*devices)[0].kind() == DeviceKind::Cpu;
  // The batch starts on device 0, where PyTorch's benchmark keeps it: the timed steps measure
  // training, not a copy of the batch to the device (a GPU's, or a simulated device's memory)
  // that the PyTorch side never makes.
  data.inputs = data.inputs.to(devices->shared(0));
  data.targets = data.targets.to(devices->shared(0));
  Model model(spec);
  TensorMap state = model.initial_state(o.seed);
  Trainer trainer(devices, std::move(model), state, TrainOptions{});
  for (int i = 0; i < o.warmup; ++i) {
    Iteration it(trainer, data.inputs, data.targets);
    it.run_to_end();
    m.chunks = it.chunks();
  }

  std::unique_ptr<GemmReferences> references;
  if (gemm_reference) references = std::make_unique<GemmReferences>(m.gemm, spec, m.batch);
  // The GEMM references run between the rounds, so all see the same load, and are measured as the
  // engine is: the mean pass of a round of as many passes as a round has steps, the best round.
  StepTiming timing = bench_timing(o);
  timing.warmup = 0;  // warmed up above
  if (references) timing.between_rounds = [&] { references->time_round(timing.per_round, m.gemm); };
  m.seconds_per_step = time_dp_steps(trainer, data.inputs, data.targets, timing);
  if (references) references->finish(m.gemm);  // after the steps: the engine has chosen every shape's library

  // A separate pass with an observer, so its snapshots do not slow the timed loop.
  m.stage_iters = o.stage_iters;
  for (int i = 0; i < o.stage_iters; ++i) {
    Iteration it(trainer, data.inputs, data.targets, &m.stages);
    it.run_to_end();
    m.chunks = it.chunks();
  }
  return m;
}

// DistributedDataParallel on the same model and GLOBAL batch (DistributedSampler shards), best of
// three rounds as above.
struct DdpMeasurement {
  double seconds_per_step = 0;
  StageTotals stages;  // over stage_iters iterations
  int stage_iters = 0;
};

DdpMeasurement measure_ddp(const std::string& preset, const std::string& device_spec, const BenchOptions& o) {
  ModelSpec spec = preset_model(preset);
  const int64_t batch = default_batch(preset);
  Dataset data = make_data_for_model(spec, batch, o.seed + 1);
  auto devices = DeviceSet::create(device_spec);
  Model model(spec);
  TensorMap state = model.initial_state(o.seed);
  DdpOptions options;
  options.optimizer.lr = 0.01;
  DdpTrainer trainer(devices, std::move(model), state, options);
  DdpMeasurement m;
  m.seconds_per_step = time_ddp_steps(trainer, data.inputs, data.targets, bench_timing(o));
  // As for DataParallel: a separate observed pass, so the stage events do not slow the timed loop.
  m.stage_iters = o.stage_iters;
  for (int i = 0; i < o.stage_iters; ++i) DdpIteration(trainer, data.inputs, data.targets, &m.stages).run_to_end();
  return m;
}

nlohmann::json stages_json(const StageTotals& stages, int stage_iters) {
  nlohmann::json j = nlohmann::json::object();
  for (int k = 0; k < kStageKinds; ++k) {
    const double ms = 1e3 * stages.seconds[static_cast<size_t>(k)] / std::max(stage_iters, 1);
    if (ms > 0) j[stage_kind_name(static_cast<StageKind>(k))] = ms;
  }
  return j;
}

// "forward 61% backward 30% reduce_grads 4% ..." in decreasing order.
std::string stages_line(const StageTotals& stages) {
  std::vector<std::pair<double, std::string>> parts;
  const double total = stages.total();
  for (int k = 0; k < kStageKinds; ++k) {
    const double s = stages.seconds[static_cast<size_t>(k)];
    if (s > 0) parts.emplace_back(s, stage_kind_name(static_cast<StageKind>(k)));
  }
  std::sort(parts.rbegin(), parts.rend());
  std::string line;
  for (const auto& [s, name] : parts) line += strf("%s %.0f%%  ", name.c_str(), total > 0 ? 100.0 * s / total : 0.0);
  return line;
}

// The per-layer profile: "Linear 0.05+0.09  BatchNorm1d 0.02+0.03 ..." (ms per step, forward +
// backward, each the median over the observed iterations) in layer order, and the same as JSON
// [{layer, type, forward_ms, backward_ms}].
std::string layers_line(const Measurement& m, const ModelSpec& spec) {
  std::string line;
  for (size_t i = 0; i < m.stages.forward_by_layer.size() && i < spec.layers.size(); ++i)
    line += strf("%s %.3f+%.3f  ", layer_kind_name(spec.layers[i].kind), 1e3 * m.stages.forward_median(i),
                 1e3 * m.stages.backward_median(i));
  return line;
}

nlohmann::json layers_json(const Measurement& m, const ModelSpec& spec) {
  nlohmann::json j = nlohmann::json::array();
  for (size_t i = 0; i < m.stages.forward_by_layer.size() && i < spec.layers.size(); ++i)
    j.push_back({{"layer", i},
                 {"type", layer_kind_name(spec.layers[i].kind)},
                 {"forward_ms", 1e3 * m.stages.forward_median(i)},
                 {"backward_ms", 1e3 * m.stages.backward_median(i)}});
  return j;
}

// Every entry of every list, and the JSON output, is checked before the first measurement: a bad
// second device or model must not fail minutes into the run. Returns the device sets to measure.
std::vector<std::string> checked_device_specs(const BenchOptions& o) {
  if (!o.json.empty()) check_output_path(o.json, "--json");
  const std::vector<std::string> device_specs = o.devices.empty() ? default_devices() : o.devices;
  for (const std::string& preset : o.models) (void)preset_model(preset);
  for (const std::string& spec : device_specs) (void)devices_from_flag(spec);
  return device_specs;
}

// The JSON document before any figure: the machine, the settings and the empty result lists.
nlohmann::json bench_json_skeleton(const BenchOptions& o) {
  nlohmann::json out;
  out["machine"] = {{"hardware_threads", std::thread::hardware_concurrency()},
                    {"openblas", openblas_get_config()},
                    {"openblas_core", openblas_get_corename()}};
  out["iters"] = o.iters;
  out["results"] = nlohmann::json::array();
  out["ddp"] = nlohmann::json::array();  // DDP on the multi-device sets, same model and global batch
  return out;
}

// What one stage's hand-off to the device threads costs, before any model: the floor under every
// stage of DataParallel and DDP on simulated devices.
void bench_handoffs(const std::vector<std::string>& device_specs, nlohmann::json& out) {
  out["handoff"] = nlohmann::json::array();
  for (const std::string& spec : device_specs) {
    if (DeviceSet::create(spec)->size() < 2) continue;
    const HandoffLatency h = measure_handoff(spec);
    std::cout << strf("hand-off %-8s %6.1f us median, %6.1f us p90 (%d empty stages)\n", spec.c_str(), h.median_us,
                      h.p90_us, h.calls);
    out["handoff"].push_back({{"devices", spec}, {"median_us", h.median_us}, {"p90_us", h.p90_us}, {"calls", h.calls}});
  }
}

// The machine's own speed-up for a CPU device set of K > 1 devices (K independent GEMM workers
// against one), measured once per K in a run; nullptr for one device or GPUs.
using References = std::map<int, MachineReference>;
const MachineReference* machine_reference_for(const std::string& spec, References& refs, nlohmann::json& out) {
  const auto devices = DeviceSet::create(spec);
  const int k = devices->size();
  if (k < 2 || (*devices)[0].kind() != DeviceKind::Cpu) return nullptr;
  if (!refs.count(k)) {
    refs[k] = measure_machine_reference(k, machine_reference_shapes(), 0.25);
    const MachineReference& r = refs[k];
    std::cout << strf("           machine reference: %d independent single-threaded GEMM workers run %.2fx one "
                      "worker's GEMMs (the most any strategy can reach on cpu:%d here, now)\n",
                      k, r.speedup(), k);
    out["machine_reference"].push_back({{"workers", k}, {"speedup", r.speedup()},
                                        {"one_worker_passes_per_s", r.one_worker_passes_per_s},
                                        {"all_workers_passes_per_s", r.all_workers_passes_per_s}});
  }
  return &refs.at(k);
}

// "efficiency 0.81 of the machine's 1.69x" beside a speed-up, and the JSON field.
std::string efficiency_words(double speedup, const MachineReference* ref, nlohmann::json& row) {
  if (!ref || speedup <= 0 || ref->speedup() <= 0) return "";
  const double efficiency = speedup / ref->speedup();
  row["machine_reference_speedup"] = ref->speedup();
  row["parallel_efficiency"] = efficiency;
  return strf("  efficiency %.2f of the machine's %.2fx", efficiency, ref->speedup());
}

// "  on 1 free core of 2" beside a multi-device CPU row whose devices outnumbered the cores the engine
// found free while it measured (engine/free_cores.h): no speed-up past that count could show. Also
// the JSON field, on every row.
std::string free_core_words(const std::string& spec, int device_count, nlohmann::json& row) {
  const CoreLoad load = FreeCores::sample_now();  // since the sample taken before the row was measured
  row["free_cores"] = load.free_cores();
  row["usable_cores"] = load.usable;
  if (device_count < 2 || static_cast<unsigned>(device_count) <= load.free_cores() || spec.rfind("cpu", 0) != 0) return "";
  return strf("  on %u free core%s of %u: the devices took turns", load.free_cores(), load.free_cores() == 1 ? "" : "s",
              load.usable);
}

// The DataParallel (or one-device) row: printed, with its stage and layer lines, and added to out["results"].
void report_dp(const std::string& preset, const std::string& spec, const Measurement& m, double speedup,
               const MachineReference* ref, nlohmann::json& out) {
  nlohmann::json r;
  const std::string efficiency = efficiency_words(speedup, ref, r) + free_core_words(spec, m.device_count, r);
  std::cout << strf("%-10s %5lld %-8s %-14s %9.3f %9.1f %11.0f %8s%s\n", preset.c_str(),
                    static_cast<long long>(m.batch), spec.c_str(), list_str(m.chunks).c_str(),
                    1e3 * m.seconds_per_step, 1.0 / m.seconds_per_step, m.batch / m.seconds_per_step,
                    speedup > 0 ? strf("%.2fx", speedup).c_str() : "-", efficiency.c_str());
  std::cout << "           time per stage: " << stages_line(m.stages) << "\n";
  // Per layer on one device, where a layer's stage is its own work (on several devices it
  // also holds the hand-off to the workers).
  const ModelSpec model_spec = preset_model(preset);
  if (m.device_count == 1 && m.stage_iters > 0)
    std::cout << "           per layer, ms fwd+bwd: " << layers_line(m, model_spec) << "\n";
  if (m.cpu) report_gemm_libraries(m.chunks, model_spec, r);
  r.update(nlohmann::json{{"model", preset},
                      {"batch", m.batch},
                      {"devices", spec},
                      {"device_count", m.device_count},
                      {"chunks", m.chunks},
                      {"ms_per_step", 1e3 * m.seconds_per_step},
                      {"steps_per_s", 1.0 / m.seconds_per_step},
                      {"samples_per_s", m.batch / m.seconds_per_step},
                      {"stage_ms_per_step", stages_json(m.stages, m.stage_iters)},
                      {"layer_ms_per_step", layers_json(m, model_spec)}});
  if (speedup > 0) r["speedup_vs_one_device"] = speedup;
  out["results"].push_back(r);
}

// The DDP row on the same device set, measured, printed and added to out["ddp"]; compared with the
// DataParallel measurement m and the one-device time.
void bench_ddp(const std::string& preset, const std::string& spec, const BenchOptions& o, const Measurement& m,
               double one_device, const MachineReference* ref, nlohmann::json& out) {
  const DdpMeasurement dm = measure_ddp(preset, spec, o);
  const double ddp = dm.seconds_per_step;
  nlohmann::json d;
  const std::string efficiency =
      efficiency_words(one_device > 0 ? one_device / ddp : 0, ref, d) + free_core_words(spec, m.device_count, d);
  std::cout << strf("%-10s %5lld %-8s %-14s %9.3f %9.1f %11.0f %8s  DDP: %.2fx DataParallel's speed%s\n",
                    preset.c_str(), static_cast<long long>(m.batch), (spec + " ddp").c_str(), "sampler",
                    1e3 * ddp, 1.0 / ddp, m.batch / ddp,
                    one_device > 0 ? strf("%.2fx", one_device / ddp).c_str() : "-", m.seconds_per_step / ddp,
                    efficiency.c_str());
  if (dm.stage_iters > 0) std::cout << "           time per stage: " << stages_line(dm.stages) << "\n";
  d.update(nlohmann::json{{"model", preset},         {"batch", m.batch},         {"devices", spec},
                          {"ms_per_step", 1e3 * ddp}, {"steps_per_s", 1.0 / ddp}, {"samples_per_s", m.batch / ddp},
                          {"ddp_speed_vs_dp", m.seconds_per_step / ddp},
                          {"stage_ms_per_step", stages_json(dm.stages, dm.stage_iters)}});
  if (one_device > 0) d["speedup_vs_one_device"] = one_device / ddp;
  out["ddp"].push_back(d);
}

// One model on every device set; one_device is the first one-device time, the speed-ups' base.
void bench_model(const std::string& preset, const std::vector<std::string>& device_specs, const BenchOptions& o,
                 References& refs, nlohmann::json& out) {
  double one_device = 0;
  for (const std::string& spec : device_specs) {
    // The GEMM yardstick: the large MLP on one device, against its GEMM library on the same shapes.
    const bool gemm_reference = preset == "mlp-large" && !out.contains("gemm") && DeviceSet::create(spec)->size() == 1;
    FreeCores::sample_now();  // the row's free cores are those of its own measurement
    Measurement m = measure(preset, spec, o, gemm_reference);
    if (m.device_count == 1 && one_device == 0) one_device = m.seconds_per_step;
    const double speedup = one_device > 0 ? one_device / m.seconds_per_step : 0;
    const MachineReference* ref = o.machine_reference ? machine_reference_for(spec, refs, out) : nullptr;
    report_dp(preset, spec, m, speedup, ref, out);
    if (o.ddp && m.device_count > 1) bench_ddp(preset, spec, o, m, one_device, ref, out);

    if (gemm_reference) report_gemm(preset, spec, m.gemm, m.seconds_per_step, out);
  }
}

void run_bench(const BenchOptions& o) {
  const std::vector<std::string> device_specs = checked_device_specs(o);
  nlohmann::json out = bench_json_skeleton(o);
  bench_handoffs(device_specs, out);
  std::cout << strf("%-10s %5s %-8s %-14s %9s %9s %11s %8s\n", "model", "batch", "devices", "chunks", "ms/step",
                    "steps/s", "samples/s", "vs 1 dev");
  References refs;  // the machine's speed-up per device count, measured once in the run
  for (const std::string& preset : o.models) bench_model(preset, device_specs, o, refs, out);
  if (!o.json.empty()) {
    write_file_atomic(o.json, out.dump(1) + "\n");
    std::cout << "JSON -> " << o.json << "\n";
  }
}

}  // namespace

void add_bench_memory_command(CLI::App* bench, Action& run);  // cmd_bench_memory.cpp

void add_bench_command(CLI::App& app, Action& run) {
  auto o = std::make_shared<BenchOptions>();
  auto* sub = app.add_subcommand("bench", "Training-step throughput: one device versus DataParallel versus DDP; JSON out");
  sub->add_option("--devices", o->devices, "Device specs to compare (default: cpu:1 cpu:2 cpu:4, or the GPUs)");
  sub->add_option("--models", o->models, "Presets: simple mnist-mlp mlp-large cnn")->capture_default_str();
  sub->add_option("--iters", o->iters, "Timed iterations per model and device set")->capture_default_str()->transform(integer_in<int>(1));
  sub->add_option("--warmup", o->warmup, "Untimed iterations first")->capture_default_str()->transform(integer_in<int>(0));
  sub->add_option("--stage-iters", o->stage_iters, "Iterations observed for the per-stage times")->capture_default_str()->transform(integer_in<int>(0));
  sub->add_option("--json", o->json, "Write the figures as JSON");
  sub->add_option("--seed", o->seed, "Seed for weights and data")->capture_default_str()->transform(integer_in<uint64_t>());
  sub->add_flag("!--no-ddp", o->ddp, "Skip the DistributedDataParallel rows");
  sub->add_flag("!--no-machine-reference", o->machine_reference,
                "Skip the machine's reference (K independent GEMM workers against one) and the efficiency figures");
  // `dpv bench allreduce` (cmd_bench_allreduce.cpp) is a subcommand of this one and sets its own action.
  sub->callback([o, sub, &run] {
    if (sub->get_subcommands().empty()) run = [o] { run_bench(*o); };
  });
  add_bench_memory_command(sub, run);
}

}  // namespace dpv::cli
