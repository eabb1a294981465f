#include "cli/ddp_launched.h"

#include <iostream>
#include <numeric>
#include <vector>

#include "cli/format.h"
#include "cli/step_inputs.h"
#include "engine/ddp/comm_hooks/hook_output.h"
#include "engine/ddp/ddp_output.h"
#include "engine/ddp/ddp_rank.h"
#include "engine/ddp/gather_rank_results.h"
#include "engine/process_groups/multiprocess/rank_env.h"
#include "engine/error.h"
#include "engine/number_text.h"
#include "engine/io/safetensors.h"
#include "engine/model_spec.h"
#include "engine/run/run_spec.h"

namespace dpv::cli {

bool launched_rank() { return dist::launched_by_a_launcher(); }

dist::RankEnv read_launched_rank_env(const dist::EnvLookup& lookup) {
  try {
    return dist::read_rank_env(lookup);
  } catch (const Error& e) {
    throw e.reworded(std::string(e.what()) + "; run it as `dpv launch --nproc-per-node K -- ...`");
  }
}

void add_step_ddp_metadata(DdpStepOutput& out, const StepOptions& o, const std::string& devices) {
  out.metadata["producer"] = o.zero > 0 ? "dpv step --zero " + std::to_string(o.zero) : std::string("dpv step --ddp");
  out.metadata["devices"] = devices;
  out.metadata["steps"] = std::to_string(o.steps);
  out.metadata["sync_bn"] = o.run.sync_bn ? "true" : "false";
  out.metadata["broadcast_buffers"] = o.run.ddp.broadcast_buffers ? "true" : "false";
}

std::string step_command_name(const StepOptions& o) {
  return o.zero > 0 ? "dpv step --zero " + std::to_string(o.zero) : std::string("dpv step --ddp");
}

std::string sharding_words(const DdpRankResult& rank0) {
  if (rank0.zero_stage >= 2)
    return "flat parameter of " + std::to_string(rank0.flat_layout.padded_numel) + " elements, " +
           std::to_string(rank0.flat_layout.shard_numel()) + " per rank";
  std::string words = count_text(static_cast<int64_t>(rank0.buckets.size()), "bucket");
  if (rank0.zero_stage == 1) words += ", optimizer state for " + count_text(static_cast<int64_t>(rank0.partition.at(0).size()), "parameter") + " on rank 0";
  return words;
}

namespace {

// The --devices a launched job stands for, as the in-process run would name it: cpu:K with Gloo,
// cuda (a GPU per rank) with NCCL.
std::string job_devices(const dist::RankEnv& env, dist::ProcessGroupBackend backend) {
  return backend == dist::ProcessGroupBackend::Nccl ? "cuda" : "cpu:" + std::to_string(env.world_size);
}

// A --devices given to a launched rank must name what the launcher already fixed: the world size,
// and each rank's device (cpu, or cuda:LOCAL_RANK with NCCL).
void check_devices_match_job(const std::string& given, const dist::RankEnv& env, dist::ProcessGroupBackend backend) {
  const DeviceSpec spec = parse_device_spec(given);  // a malformed spec is its own ValueError
  const std::string or_leave_out = ", or leave --devices out: under a launcher each rank takes its own device";
  if (backend == dist::ProcessGroupBackend::Nccl) {
    check(spec.kind == DeviceKind::Cuda,
          "--devices " + given + " names CPU devices, but the job runs with --backend nccl (one GPU per rank): "
          "use --devices cuda, or --backend gloo for CPU ranks" + or_leave_out, ErrorClass::ValueError);
    std::vector<int> local(static_cast<size_t>(env.local_world_size));
    std::iota(local.begin(), local.end(), 0);
    std::string listed = "cuda:";
    for (int g : local) listed.append(g ? "," : "").append(std::to_string(g));
    check(!spec.is_virtual && (spec.gpus.empty() || spec.gpus == local),
          "--devices " + given + " does not match the launched job: with --backend nccl each rank owns one whole GPU, "
          "cuda:LOCAL_RANK, so the " + std::to_string(env.local_world_size) + " ranks on this node use " + listed +
              ": give --devices cuda or " + listed + or_leave_out, ErrorClass::ValueError);
    return;
  }
  const std::string world = std::to_string(env.world_size);
  check(spec.kind == DeviceKind::Cpu && spec.count == env.world_size,
        "--devices " + given + " does not match the launched job: with --backend gloo each of the " + world +
            " ranks owns one CPU device, so give --devices cpu:" + world +
            " (the same command then runs in-process with the same result)" + or_leave_out, ErrorClass::ValueError);
}

}  // namespace

LaunchedRank join_launched_job(const std::optional<std::string>& devices_spec) {
  LaunchedRank lr;
  const dist::EnvLookup lookup = dist::environment_lookup();
  const dist::RankEnv env = read_launched_rank_env(lookup);
  const dist::DistOptions options = dist::read_dist_options(lookup);
  // Without LOCAL_RANK (env:// needs only four variables) a CPU rank needs nothing more; a GPU rank
  // would not know which GPU of its node is its own.
  check(env.local_rank_given || options.backend != dist::ProcessGroupBackend::Nccl,
        "LOCAL_RANK is not set: with --backend nccl each rank uses GPU cuda:LOCAL_RANK, so set LOCAL_RANK "
        "(and LOCAL_WORLD_SIZE) as torchrun and dpv launch do",
        ErrorClass::ValueError);
  if (devices_spec) {
    check_devices_match_job(*devices_spec, env, options.backend);
    lr.devices_spec = *devices_spec;
  } else {
    lr.devices_spec = job_devices(env, options.backend);
  }
  lr.session = dist::init_process_group(env, options);
  if (options.backend == dist::ProcessGroupBackend::Nccl) {
    // The session's GPU: it outlives the NCCL group, whatever order lr's members go in.
    lr.devices = lr.session->devices();
    lr.device = lr.session->device();
    lr.comm_device = lr.device;
  } else {
    lr.devices = DeviceSet::create("cpu:1");
    lr.device = lr.devices->shared(0);
  }
  return lr;
}

void run_step_ddp_launched(const StepOptions& o) {
  LaunchedRank lr = join_launched_job(o.devices_given ? std::optional(o.run.devices) : std::nullopt);
  ProcessGroup& group = lr.session->group();
  verify_same_ddp_config(*lr.session, ddp_config_of(step_ddp_options(o), o.steps));
  Model model(load_model_spec(o.model));
  const DType dtype = model.dtype();
  const auto [input, target] = load_step_batch(o.batch);
  TensorMap state = load_step_state(model, o.state, o.run.seed);

  DdpRankResult mine = run_rank_steps(group, lr.device, model, state, input, target, step_ddp_options(o), o.steps);
  // Rank 0 needs every rank's result; the group moves them (every rank calls it).
  const std::vector<DdpRankResult> results = gather_rank_results(group, mine, lr.comm_device);
  if (lr.rank() == 0) {
    DdpStepOutput out = ddp_step_output(results, dtype);
    add_step_ddp_metadata(out, o, lr.devices_spec);
    if (o.comm_hook.kind != CommHookKind::None) {  // rank 0's own hook: the state stays on each rank
      add_comm_hook_bytes(out.tensors, mine.bucket_runs);
      for (const auto& [name, t] : mine.comm_hook_state.items()) out.tensors.set(name, t);
    }
    out.metadata["launched"] = std::to_string(lr.world_size()) + " processes, " + group.backend();
    save_safetensors(o.out, out.tensors, out.metadata);
    std::vector<int64_t> shard_sizes;
    for (const DdpRankResult& r : results) shard_sizes.push_back(r.output.defined() ? r.output.dim(0) : 0);
    std::cout << step_command_name(o) << ": " << o.steps << " iteration" << (o.steps == 1 ? "" : "s") << " on "
              << lr.devices_spec << " (" << lr.world_size() << " launched processes over " << group.backend()
              << ", shards " << list_str(shard_sizes) << ", " << sharding_words(results[0])
              << comm_hook_words(o.comm_hook.kind, mine.bucket_runs)
              << "), mean loss over the ranks "
              << strf("%.6f", out.tensors.at("loss").item()) << " -> " << o.out << "\n";
  }
  lr.session->shutdown();
}

}  // namespace dpv::cli
