#pragma once
// The launched side of `dpv step --ddp` and `dpv train --ddp`: when a launcher started this
// process (RANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID set), it is one rank of a job of real
// processes. It joins the job's process group (Gloo, or NCCL with --backend nccl), owns one
// device (cpu, or cuda:LOCAL_RANK), runs the same per-rank DDP code the in-process ranks run
// (engine/ddp/ddp_rank.h), and rank 0 gathers what the output names through the group.
#include <memory>
#include <optional>
#include <string>

#include "cli/gemm_sharing.h"
#include "cli/launch_ddp_config.h"  // verify_same_ddp_config: every launched DDP command calls it
#include "engine/ddp/ddp_output.h"
#include "engine/ddp/ddp_rank.h"
#include "engine/device.h"
#include "engine/process_groups/multiprocess/init_process_group.h"

namespace dpv::cli {

struct StepOptions;

// True when this process is a rank of a launched job.
bool launched_rank();

// dist::read_rank_env, its error extended with how dpv starts workers: the engine names the
// variables it missed, the command that sets them is dpv's to name.
dist::RankEnv read_launched_rank_env(const dist::EnvLookup& lookup);

// This rank's membership and device. `devices_spec` is the job's --devices as the in-process run
// would name it (cpu:K, or a CUDA spec with --backend nccl), or nullopt when --devices was not
// given: the launcher already fixed the world size and each rank's device. A given spec that disagrees
// with the job (cpu:3 for 2 ranks, virtual GPUs) is a ValueError that says what to give instead.
struct LaunchedRank {
  std::unique_ptr<dist::DistSession> session;
  std::unique_ptr<LaunchedGemmChoices> gemm_choices;  // rank 0's GEMM library per shape; ends before session
  std::string devices_spec;             // the given --devices, else the job's own: cpu:K (Gloo), cuda (NCCL)
  std::shared_ptr<DeviceSet> devices;   // this rank's one device
  std::shared_ptr<Device> device;
  std::shared_ptr<Device> comm_device;  // where the group's tensors live: null (host) for Gloo
  int rank() const { return session->env().rank; }
  int world_size() const { return session->env().world_size; }
};
LaunchedRank join_launched_job(const std::optional<std::string>& devices_spec);

// The metadata `dpv step --ddp`'s output records: the same for in-process ranks
// (cmd_step_ddp.cpp) and launched ones.
void add_step_ddp_metadata(DdpStepOutput& out, const StepOptions& o, const std::string& devices);
// "dpv step --ddp" or "dpv step --zero 2", as the summary line and the metadata name the command.
std::string step_command_name(const StepOptions& o);
// The summary line's words on rank 0's gradient sync: "3 buckets", "2 buckets, optimizer state for
// 4 parameters on rank 0", "flat parameter of 1026 elements, 513 per rank".
std::string sharding_words(const DdpRankResult& rank0);

// `dpv step --ddp` as one launched rank; rank 0 writes --out (atomically) and prints the summary.
void run_step_ddp_launched(const StepOptions& o);

}  // namespace dpv::cli
