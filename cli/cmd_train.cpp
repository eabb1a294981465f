// `dpv train`: DataParallel training with a progress line (loss, accuracy, samples/s) on the
// built-in data sets (spiral, blobs, images) or MNIST IDX files; optional Chrome trace.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/checkpoint.h"
#include "cli/comm_hook_options.h"
#include "cli/commands.h"
#include "cli/flag_errors.h"
#include "cli/int_options.h"
#include "cli/optimizer_options.h"
#include "cli/format.h"
#include "cli/output_paths.h"
#include "cli/progress.h"
#include "cli/train_ddp.h"
#include "cli/train_loop.h"
#include "cli/size_checks.h"
#include "cli/validators.h"
#include "course/batchnorm_stats.h"
#include "engine/data_parallel.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/model_data.h"
#include "engine/netmodel/link_model.h"
#include "engine/run/run_spec.h"
#include "engine/trace.h"

namespace dpv::cli {
namespace {

// `dpv train`'s defaults, as --help shows them: one CPU device, mlp-bn, and lr 0.1 (RunSpec's is 0.01).
RunSpec train_command_defaults() {
  RunSpec run;
  run.devices = "cpu:1";
  run.preset = "mlp-bn";
  run.optimizer.lr = 0.1;
  return run;
}

struct TrainCliOptions {
  // --devices, --preset, --lr, --momentum, --weight-decay, --sync-bn and --seed go straight in;
  // the model file and the strategy are settled when the run starts (run_spec_of), the batch
  // (--batch, else the preset's) after the model.
  RunSpec run = train_command_defaults();
  std::string model_file, data = "auto";
  bool devices_given = false;  // without --devices, a launched DDP rank takes the launcher's device
  std::string trace, idx_images, idx_labels;
  int64_t steps = 200, batch = 0, samples = 0;  // batch 0: the preset's
  int trace_steps = 5;
  bool ddp = false;  // DistributedDataParallel (cli/train_ddp.h) instead of DataParallel
  CheckpointOptions checkpoint;  // --checkpoint DIR, --checkpoint-every K (cli/checkpoint.h)
  std::string step_json, simulated_rate, simulated_delay;  // --step-json, --simulated-rate, --simulated-delay
  CommHookOptions comm_hook;  // --comm-hook and the PowerSGD flags (cli/comm_hook_options.h)
  bool probe_hook_error = false;  // --probe-hook-error (cli/train_ddp.h)
};

// --simulated-rate and --simulated-delay as the link they describe (nullopt: a real run).
std::optional<SimulatedLinkFacts> simulated_link_of(const TrainCliOptions& o) {
  if (o.simulated_rate.empty()) return std::nullopt;
  SimulatedLinkFacts link;
  link.rate_bits_per_s = netmodel::parse_rate_bits_per_s(o.simulated_rate, "--simulated-rate");
  if (!o.simulated_delay.empty()) link.delay_s = netmodel::parse_delay_s(o.simulated_delay, "--simulated-delay");
  return link;
}

// The whole run description but the batch: o.run with the model read from --model and the
// strategy --ddp names.
RunSpec run_spec_of(const TrainCliOptions& o) {
  RunSpec run = o.run;
  if (!o.model_file.empty()) run.model = load_model_spec(o.model_file);
  run.strategy = o.ddp ? StrategyKind::DistributedDataParallel : StrategyKind::DataParallel;
  return run;
}

const char* batchnorm_mode(const ModelSpec& spec, bool sync_bn) {
  const bool has_bn = std::any_of(spec.layers.begin(), spec.layers.end(),
                                  [](const LayerSpec& l) { return is_batchnorm(l.kind); });
  if (!has_bn) return "no BatchNorm";
  return sync_bn ? "SyncBatchNorm (global statistics)" : "per-device BatchNorm";
}

void run_train(const TrainCliOptions& o) {
  check(o.idx_images.empty() == o.idx_labels.empty(), "--idx-images and --idx-labels go together", ErrorClass::ValueError);
  // Everything that can be checked is checked before the work: the trace's folder, that it is no
  // input, and the memory the data set and one step will ask for.
  if (!o.trace.empty()) {
    check_output_path(o.trace, "--trace");
    check_trace_outputs(o.trace, o.ddp, {{"--model", o.model_file}, {"--idx-images", o.idx_images},
                                         {"--idx-labels", o.idx_labels}});
  }
  if (!o.step_json.empty()) check_output_path(o.step_json, "--step-json");
  RunSpec run = run_spec_of(o);
  const ModelSpec spec = run.model_spec();
  run.batch = o.batch > 0 ? o.batch : default_batch(run.preset);
  const int64_t batch = run.batch;
  const std::string batch_asked_by =
      o.batch > 0 ? "--batch " + std::to_string(batch) : "the preset's batch of " + std::to_string(batch);
  auto devices = devices_from_flag(run.devices);
  check_step_bytes(spec, batch, devices->size(),
                   o.model_file.empty() ? "--preset " + run.preset : "--model " + o.model_file, batch_asked_by);
  auto too_few = [batch](int64_t n) {
    check(n >= batch, "the data set has " + std::to_string(n) + " samples, fewer than one batch of " +
                          std::to_string(batch), ErrorClass::ValueError);
  };
  Dataset data;
  if (!o.idx_images.empty()) {
    data = load_idx_for_model(spec, o.idx_images, o.idx_labels);
  } else {
    // Default size: 16 (images) or 32 batches, 1024 to 8192 samples; the batch is capped first so
    // the product cannot overflow.
    const int64_t per_batch = input_shape_of(spec).image ? 16 : 32;
    const int64_t n = o.samples > 0 ? o.samples : std::clamp<int64_t>(std::min<int64_t>(batch, 8192) * per_batch, 1024, 8192);
    too_few(n);
    check_dataset_bytes(spec, n, o.samples > 0 ? "--samples " + std::to_string(n) : batch_asked_by);
    // The engine names the data kind; the flag that chose it is the CLI's to name. "auto" always fits.
    auto make = [&] { return make_data_for_model(spec, n, run.seed + 1, o.data); };
    data = o.data == "auto" ? make() : with_flag("--data", make);
  }
  const int64_t n = data.inputs.dim(0);
  too_few(n);

  if (o.ddp) {
    TrainDdpInputs in;
    in.model_label = o.model_file.empty() ? run.preset : o.model_file;
    in.run = run;
    in.data = std::move(data);
    in.steps = o.steps;
    in.devices_given = o.devices_given;
    in.trace = o.trace;
    in.trace_steps = o.trace_steps;
    in.checkpoint = o.checkpoint;
    in.step_json = o.step_json;
    in.simulated_link = simulated_link_of(o);
    in.comm_hook = o.comm_hook;
    in.probe_hook_error = o.probe_hook_error;
    return run_train_ddp(in);
  }
  const TrainCheckpoints checkpoints(o.checkpoint, checkpoint_facts(run, run.devices, devices->size(), data), run,
                                     o.steps, n);
  const std::optional<TrainingState> resumed = checkpoints.resume(checkpoints.find(), true);
  const std::unique_ptr<Strategy> strategy = make_strategy(run, devices, resumed ? &resumed->model : nullptr);
  if (resumed) restore_training_state(*strategy, *resumed);

  std::cout << "dpv train: " << (o.model_file.empty() ? run.preset : o.model_file) << " on " << data.name << " ("
            << n << " samples, " << data.classes << " classes), batch " << batch << ", " << run.devices << " ("
            << devices->size() << " device" << (devices->size() == 1 ? "" : "s") << ", chunks "
            << list_str(chunk_sizes(batch, devices->size())) << "), "
            << batchnorm_mode(spec, run.sync_bn) << ", " << optimizer_class_name(run.optimizer.kind) << " lr "
            << run.optimizer.lr << "\n"
            << std::flush;  // through a pipe, Ctrl-C before the first progress line must not lose it

  TraceRecorder trace;
  TrainLoopInputs loop;
  loop.data = &data;
  loop.batch = batch;
  loop.steps = o.steps;
  loop.traced = !o.trace.empty();
  loop.trace_steps = o.trace_steps;
  loop.first_step = resumed ? resumed->step : 0;
  if (checkpoints.enabled()) loop.after_step = [&](int64_t done) { checkpoints.after_step(*strategy, done); };
  run_training_loop(*strategy, loop, trace);
  if (!o.trace.empty()) {
    trace.save(o.trace);
    std::cout << "trace: " << std::min<int64_t>(o.steps, o.trace_steps) << " iteration(s), " << trace.events().size()
              << " stages -> " << o.trace << " (open in https://ui.perfetto.dev or chrome://tracing)\n";
  }
}

}  // namespace

void add_train_command(CLI::App& app, Action& run) {
  auto o = std::make_shared<TrainCliOptions>();
  auto* sub = app.add_subcommand("train", "DataParallel training with a progress bar, loss and accuracy");
  std::string presets;
  for (const auto& p : preset_names()) presets += (presets.empty() ? "" : ", ") + p;
  auto* preset = sub->add_option("--preset", o->run.preset, "Model preset: " + presets)->capture_default_str();
  sub->add_option("--model", o->model_file, "Model spec (JSON) instead of a preset")->excludes(preset);
  auto* devices = sub->add_option("--devices", o->run.devices,
                                  "Device spec: cpu:K, cuda, cuda:0,1, cuda:0xK (for --ddp under `dpv launch`, "
                                  "default: each rank's own device)")
                      ->capture_default_str();
  sub->add_option("--steps", o->steps, "Training iterations")->capture_default_str()->transform(integer_in<int64_t>(1));
  sub->add_option("--batch", o->batch, "Batch size (default: the preset's)")->transform(integer_in<int64_t>(1));
  sub->add_flag("--ddp", o->ddp, "DistributedDataParallel: one rank per device, or per process under `dpv launch`");
  sub->add_flag("--sync-bn", o->run.sync_bn, "BatchNorm layers use the statistics of the whole batch (DDP + SyncBatchNorm)");
  const auto finish_optimizer = add_optimizer_options(sub, o->run.optimizer);
  sub->add_option("--seed", o->run.seed, "Seed for weights and data")->capture_default_str()->transform(integer_in<uint64_t>());
  sub->add_option("--data", o->data, "Built-in data: auto, spiral, blobs")->capture_default_str();
  sub->add_option("--samples", o->samples, "Size of the built-in data set (default: from the batch)")->transform(integer_in<int64_t>(1));
  sub->add_option("--idx-images", o->idx_images, "MNIST IDX image file (e.g. train-images-idx3-ubyte)");
  sub->add_option("--idx-labels", o->idx_labels, "MNIST IDX label file (e.g. train-labels-idx1-ubyte)");
  sub->add_option("--trace", o->trace, "Write a Chrome trace (JSON) of the first --trace-steps iterations");
  auto* checkpoint = sub->add_option("--checkpoint", o->checkpoint.dir,
                                     "Folder of checkpoints: written every --checkpoint-every steps and at the end; "
                                     "a run resumes from the newest one there");
  sub->add_option("--checkpoint-every", o->checkpoint.every, "Steps between checkpoints")
      ->capture_default_str()
      ->transform(integer_in<int64_t>(1))
      ->needs(checkpoint);
  auto* bucket_cap = sub->add_option("--bucket-cap-mb", o->run.ddp.bucket_cap_mb,
                                     "DDP: gradient bucket cap in MiB (bucket_cap_mb)")
                         ->capture_default_str()
                         ->check(CLI::PositiveNumber);
  auto* step_json = sub->add_option("--step-json", o->step_json,
                                    "DDP: write rank 0's step time, exposed communication and bytes per step (JSON)");
  auto* sim_rate = sub->add_option("--simulated-rate", o->simulated_rate,
                                   "DDP: in-process ranks over a SIMULATED link of this rate (tc syntax: 10mbit, 1gbit)");
  sub->add_option("--simulated-delay", o->simulated_delay, "DDP: the simulated link's one-way delay (10ms, 500us)")
      ->needs(sim_rate);
  sub->add_option("--trace-steps", o->trace_steps, "Iterations recorded in the trace")->capture_default_str()->transform(integer_in<int>(1));
  sub->add_flag("--probe-hook-error", o->probe_hook_error,
                "DDP: one step more, recording the hook's gradient error against the exact average in --step-json")
      ->needs(step_json);
  const auto finish_comm_hook = add_comm_hook_options(sub, o->comm_hook);
  sub->callback([o, devices, finish_optimizer, finish_comm_hook, step_json, sim_rate, bucket_cap, &run] {
    finish_optimizer();
    finish_comm_hook(o->ddp, 0);
    for (const CLI::Option* option : {step_json, sim_rate, bucket_cap})
      if (option->count() > 0 && !o->ddp) throw CLI::RequiresError(option->get_name(), "--ddp");
    (void)simulated_link_of(*o);  // a malformed rate or delay is a command-line error, before any work
    o->devices_given = devices->count() > 0;
    run = [o] { run_train(*o); };
  });
}

}  // namespace dpv::cli
