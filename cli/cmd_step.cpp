// `dpv step`: N DataParallel training iterations on one batch, everything written to safetensors
// so scripts (and tests/fixtures/compare_with_pytorch.py) can compare it with PyTorch.
//
// Output tensors: output, loss (0-dim)          of the last iteration, before its step
//                 grad/<param>                  reduced gradients on device 0, last iteration
//                 state/<name>                  the whole state dict after the last step
//                 stats/<i>/dev<d>/{mean,var}   per-device BatchNorm batch statistics (biased var)
//                 stats/<i>/global/{mean,var}   with --sync-bn: the synchronised statistics
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/ddp_launched.h"
#include "cli/flag_errors.h"
#include "cli/int_options.h"
#include "cli/optimizer_options.h"
#include "cli/comm_hook_options.h"
#include "cli/step_inputs.h"
#include "cli/validators.h"
#include "cli/format.h"
#include "cli/output_paths.h"
#include "cli/size_checks.h"
#include "engine/data_parallel.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/io/safetensors.h"
#include "engine/model.h"
#include "engine/model_spec.h"

namespace dpv::cli {
namespace {

std::string stats_key(const BatchNormStats& s, const char* what) {
  std::string where = s.device < 0 ? "global" : "dev" + std::to_string(s.device);
  return "stats/" + std::to_string(s.layer) + "/" + where + "/" + what;
}

void run_step(const StepOptions& o) {
  check_output_path(o.out, "--out");
  check_not_an_input(o.out, "--out", {{"--model", o.model}, {"--batch", o.batch}, {"--state", o.state}});
  const ModelSpec spec = load_model_spec(o.model);
  auto devices = devices_from_flag(o.run.devices);
  // The memory the step asks for, checked before any of it is allocated (cli/size_checks.h).
  check_parameter_bytes(spec, devices->size(), "--model " + o.model);
  const auto [input, target] = load_step_batch(o.batch);
  check_step_bytes(spec, step_batch_rows(input), devices->size(), "--model " + o.model, step_batch_label(o.batch, input),
                   step_sample_shape(input));
  Model model(spec);
  const DType dtype = model.dtype();
  TensorMap state = load_step_state(model, o.state, o.run.seed);
  Trainer trainer(devices, std::move(model), state, train_options(o.run));

  std::unique_ptr<Iteration> last;
  for (int s = 0; s < o.steps; ++s) {
    last = std::make_unique<Iteration>(trainer, input, target);
    last->run_to_end();
  }

  TensorMap out;
  out.set("output", last->output().to(nullptr));
  out.set("loss", Tensor::from_doubles({}, dtype, {last->loss()}));
  for (const auto& [name, g] : trainer.grads().items()) out.set("grad/" + name, g.to(nullptr));
  const TensorMap final_state = trainer.state_to_host();
  for (const auto& [name, t] : final_state.items()) out.set("state/" + name, t);
  for (const BatchNormStats& s : last->batchnorm_stats()) {
    const Shape c{static_cast<int64_t>(s.mean.size())};
    out.set(stats_key(s, "mean"), Tensor::from_doubles(c, dtype, s.mean));
    out.set(stats_key(s, "var"), Tensor::from_doubles(c, dtype, s.var));
  }
  save_safetensors(o.out, out,
                   {{"producer", "dpv step"},
                    {"devices", o.run.devices},
                    {"chunks", list_str(last->chunks())},
                    {"steps", std::to_string(o.steps)},
                    {"sync_bn", o.run.sync_bn ? "true" : "false"}});
  std::cout << "dpv step: " << o.steps << " iteration" << (o.steps == 1 ? "" : "s") << " on " << o.run.devices
            << ", chunks " << list_str(last->chunks()) << ", loss " << py_fixed(last->loss(), 6) << " -> "
            << o.out << "\n";
}

}  // namespace

void add_step_command(CLI::App& app, Action& run) {
  auto o = std::make_shared<StepOptions>();
  auto* sub = app.add_subcommand(
      "step", "N DataParallel (or, with --ddp, DistributedDataParallel) training iterations on one batch; results to "
              "safetensors");
  sub->add_option("--model", o->model, "Model spec (JSON)")->required();
  sub->add_option("--state", o->state, "Initial state dict (safetensors); default: initialised from --seed");
  sub->add_option("--batch", o->batch, "Batch (safetensors with 'input' and int64 'target')")->required();
  auto* devices = sub->add_option("--devices", o->run.devices,
                                  "Device spec: cpu:K, cuda, cuda:0,1, cuda:0xK (required, except for --ddp under "
                                  "`dpv launch`: each rank's own device)");
  sub->add_flag("--sync-bn", o->run.sync_bn, "BatchNorm layers use the statistics of the whole batch (DDP + SyncBatchNorm)");
  const auto finish_optimizer = add_optimizer_options(sub, o->run.optimizer);
  sub->add_option("--steps", o->steps, "Iterations on the batch")->capture_default_str()->transform(integer_in<int>(1));
  sub->add_option("--seed", o->run.seed, "Seed for the initial weights when --state is not given")->capture_default_str()->transform(integer_in<uint64_t>());
  sub->add_option("--out", o->out, "Output file (safetensors), written atomically")->required();
  auto* ddp = sub->add_flag("--ddp", o->ddp,
                            "DistributedDataParallel: one rank per device; the batch is the GLOBAL batch, split by "
                            "DistributedSampler");
  sub->add_option("--zero", o->zero,
                  "Sharded data parallel over DDP's ranks: 1 = ZeroRedundancyOptimizer, 2 = FSDP SHARD_GRAD_OP, "
                  "3 = FSDP FULL_SHARD")
      ->transform(integer_in<int>(1, 3));
  auto* no_broadcast = sub->add_flag("--no-broadcast-buffers", o->no_broadcast_buffers,
                                     "DDP, ZeRO: keep every rank's own buffers (broadcast_buffers=False)");
  auto* bucket_cap = sub->add_option("--bucket-cap-mb", o->run.ddp.bucket_cap_mb,
                                     "DDP, ZeRO-1: gradient bucket cap in MiB (bucket_cap_mb)")
                         ->capture_default_str()
                         ->check(CLI::PositiveNumber);
  const auto finish_comm_hook = add_comm_hook_options(sub, o->comm_hook);
  sub->callback([o, devices, ddp, no_broadcast, bucket_cap, finish_optimizer, finish_comm_hook, &run] {
    // DDP's own options need ranks: --ddp or --zero.
    for (const CLI::Option* option : {no_broadcast, bucket_cap})
      if (option->count() > 0 && !o->ddp && o->zero == 0)
        throw CLI::RequiresError(option->get_name(), ddp->get_name() + " or --zero");
    finish_optimizer();
    finish_comm_hook(o->ddp, o->zero);
    o->devices_given = devices->count() > 0;
    finish_step_options(*o);
    // A launched DDP rank's device is fixed by the launcher (cli/ddp_launched.h); elsewhere
    // --devices is required, a command-line error like any missing option.
    const bool ranks = runs_ranks(o->run.strategy);
    if (!o->devices_given && !(ranks && launched_rank())) throw CLI::RequiredError("--devices");
    run = [o, ranks] { ranks ? run_step_ddp(*o) : run_step(*o); };
  });
}

}  // namespace dpv::cli
