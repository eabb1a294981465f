// `dpv step --ddp`: N DistributedDataParallel iterations on one GLOBAL batch, one in-process rank
// per device of --devices; rank r trains on DistributedSampler(shuffle=False, drop_last=False)'s
// indices of the batch, every step. The output (engine/ddp/ddp_output.h) is what
// tests/fixtures/make_ddp_fixtures.py records from real torch.nn.parallel.DistributedDataParallel.
#include <iostream>

#include "cli/ddp_launched.h"
#include "cli/flag_errors.h"
#include "cli/format.h"
#include "cli/output_paths.h"
#include "cli/size_checks.h"
#include "cli/step_inputs.h"
#include "engine/ddp/ddp.h"
#include "engine/ddp/comm_hooks/hook_output.h"
#include "engine/ddp/ddp_output.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/io/safetensors.h"
#include "engine/model_spec.h"
#include "engine/run/run_spec.h"

namespace dpv::cli {

void run_step_ddp(const StepOptions& o) {
  check_output_path(o.out, "--out");
  check_not_an_input(o.out, "--out", {{"--model", o.model}, {"--batch", o.batch}, {"--state", o.state}});
  // The memory the step asks for, checked before any of it is allocated (cli/size_checks.h); a
  // launched rank holds one device's share.
  const ModelSpec spec = load_model_spec(o.model);
  const std::string model_source = "--model " + o.model;
  // Started by `dpv launch` (or mpirun, srun): this process is one rank of a real job.
  if (launched_rank()) {
    check_parameter_bytes(spec, 1, model_source);
    return run_step_ddp_launched(o);
  }
  auto devices = devices_from_flag(o.run.devices);
  check_parameter_bytes(spec, devices->size(), model_source);
  const auto [input, target] = load_step_batch(o.batch);
  check_step_bytes(spec, step_batch_rows(input), devices->size(), model_source, step_batch_label(o.batch, input),
                   step_sample_shape(input));
  Model model(spec);
  const DType dtype = model.dtype();
  TensorMap state = load_step_state(model, o.state, o.run.seed);
  DdpTrainer trainer(devices, std::move(model), state, step_ddp_options(o));

  std::vector<int64_t> shard_sizes;
  for (int s = 0; s < o.steps; ++s) {
    DdpIteration it(trainer, input, target);
    it.run_to_end();
    shard_sizes.clear();
    for (const auto& shard : it.shards()) shard_sizes.push_back(static_cast<int64_t>(shard.size()));
  }
  const auto results = trainer.results();
  DdpStepOutput out = ddp_step_output(results, dtype);
  add_step_ddp_metadata(out, o, o.run.devices);
  if (o.comm_hook.kind != CommHookKind::None) {
    add_comm_hook_bytes(out.tensors, results[0].bucket_runs);
    for (const DdpRankResult& r : results)
      for (const auto& [name, t] : r.comm_hook_state.items()) out.tensors.set(name, t);
  }
  save_safetensors(o.out, out.tensors, out.metadata);
  std::cout << step_command_name(o) << ": " << o.steps << " iteration" << (o.steps == 1 ? "" : "s") << " on "
            << o.run.devices << " (" << trainer.world_size() << (trainer.world_size() == 1 ? " rank" : " ranks") << ", shards " << list_str(shard_sizes) << ", "
            << sharding_words(results[0]) << comm_hook_words(o.comm_hook.kind, results[0].bucket_runs)
            << "), mean loss over the ranks "  // the output's `loss`; each rank's own is rank<r>/loss
            << py_fixed(out.tensors.at("loss").item(), 6) << " -> " << o.out << "\n";
}

}  // namespace dpv::cli
