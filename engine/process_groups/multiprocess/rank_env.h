#pragma once
// Where a worker learns its place in the job: the variables its launcher set. Three launchers:
//   torchrun / `dpv launch`: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
//   mpirun (Open MPI):       OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE (+ MASTER_ADDR/PORT)
//   srun (Slurm):            SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE (+ MASTER_ADDR/PORT)
// The store's address always comes from MASTER_ADDR and MASTER_PORT, as with torch.distributed's env://.
// Real torchrun's agent hosts a PyTorch TCPStore there itself and says so with
// TORCHELASTIC_USE_AGENT_STORE=True (exactly "True", as PyTorch compares it); then no rank hosts
// one, every rank joins the agent's, and TORCHELASTIC_RESTART_COUNT names the attempt.
#include <functional>
#include <optional>
#include <string>

namespace dpv::dist {

// The most ranks a job may have: every RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE is checked
// against it, and an error says so.
inline constexpr long kMaxWorldSize = 1000000;

struct RankEnv {
  int rank = 0;
  int local_rank = 0;
  bool local_rank_given = true;  // false: torchrun's variables without LOCAL_RANK (env:// needs only four)
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr;
  int master_port = 0;
  std::string launcher;  // "torchrun", "mpirun" or "slurm": which variables were read
  bool agent_store = false;  // torchrun's agent hosts the store (TORCHELASTIC_USE_AGENT_STORE=True)
  int restart_count = 0;     // TORCHELASTIC_RESTART_COUNT, read when agent_store
};

// Looks a variable up; returns nullopt when unset. Tests pass a map, workers the real environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// Reads the rank variables. Throws dpv::Error naming the missing or bad variable and what sets it:
// none of the three sets present, a value that is not an integer or outside its range (saying the
// range), rank >= world size, local rank >=
// local world size, two launchers' variables that disagree, or TORCHELASTIC_USE_AGENT_STORE=True
// without a valid TORCHELASTIC_RESTART_COUNT.
RankEnv read_rank_env(const EnvLookup& lookup);
RankEnv read_rank_env_from_environment();
// True when any launcher's rank variable is set: this process is a worker of a launched job.
bool launched_by_a_launcher(const EnvLookup& lookup);
bool launched_by_a_launcher();

EnvLookup environment_lookup();

}  // namespace dpv::dist
