#include "engine/process_groups/multiprocess/rank_env.h"

#include <charconv>
#include <cstdlib>
#include <vector>

#include "engine/error.h"

namespace dpv::dist {
namespace {

struct LauncherVars {
  const char* launcher;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

const std::vector<LauncherVars>& launchers() {
  static const std::vector<LauncherVars> list{
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
      {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
  };
  return list;
}

// The bounds a value must lie in, named in its error so the fix is plain.
struct Range {
  long min, max;
  bool world_limit = false;  // the bound comes from kMaxWorldSize, which the error then names
};
constexpr Range kRankRange{0, kMaxWorldSize - 1, true};
constexpr Range kSizeRange{1, kMaxWorldSize, true};

// Parses the whole value as an integer in `range`. Slurm writes per-node task counts as "2(x3)"
// or "2,1"; `leading_only` accepts the first number of such a list.
int parse_int(const std::string& name, const std::string& value, Range range, bool leading_only = false) {
  long v = 0;
  const char* end = value.data() + value.size();
  const auto [stop, err] = std::from_chars(value.data(), end, v, 10);
  const std::string bounds = "from " + std::to_string(range.min) + " to " + std::to_string(range.max);
  if (stop == value.data() || (!leading_only && stop != end) || (err != std::errc() && err != std::errc::result_out_of_range)) {
    throw Error(name + "='" + value + "' is not an integer: it must be a whole number " + bounds, ErrorClass::ValueError);
  }
  if (err == std::errc::result_out_of_range || v < range.min || v > range.max) {
    throw Error(name + "=" + value + " is out of range: it must be " + bounds +
                    (range.world_limit ? " (dpv runs at most " + std::to_string(kMaxWorldSize) + " ranks)" : ""),
                ErrorClass::ValueError);
  }
  return static_cast<int>(v);
}

int required_int(const EnvLookup& lookup, const std::string& name, const char* launcher, Range range,
                 bool leading_only = false) {
  std::optional<std::string> v = lookup(name);
  if (!v) {
    throw Error(std::string("environment variable ") + name + " expected, but not set (the " + launcher +
                    " variables are incomplete: a launcher sets them all)",
                ErrorClass::ValueError);
  }
  return parse_int(name, *v, range, leading_only);
}

// torch.distributed's env:// needs only RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT: LOCAL_RANK
// is the script's business (which GPU to use), so a worker started with the four alone is one
// rank on its own node, local rank 0, as PyTorch's default device would be.
void read_local_ranks(const EnvLookup& lookup, const LauncherVars& l, RankEnv& e) {
  const bool torchrun = e.launcher == "torchrun";
  e.local_rank_given = !torchrun || lookup(l.local_rank).has_value();
  e.local_rank = e.local_rank_given ? required_int(lookup, l.local_rank, l.launcher, kRankRange) : 0;
  if (torchrun && !lookup(l.local_world_size)) {
    e.local_world_size = e.local_rank_given ? e.world_size : 1;
    return;
  }
  e.local_world_size = required_int(lookup, l.local_world_size, l.launcher, kSizeRange, e.launcher == "slurm");
}

// torch.distributed's _torchelastic_use_agent_store(): the value must be exactly "True".
void read_agent_store(const EnvLookup& lookup, RankEnv& env) {
  env.agent_store = lookup("TORCHELASTIC_USE_AGENT_STORE") == std::optional<std::string>("True");
  if (!env.agent_store) return;
  std::optional<std::string> attempt = lookup("TORCHELASTIC_RESTART_COUNT");
  if (!attempt) {
    throw Error("environment variable TORCHELASTIC_RESTART_COUNT expected, but not set (TORCHELASTIC_USE_AGENT_STORE="
                "True says torchrun's agent hosts the store; torchrun sets both)",
                ErrorClass::ValueError);
  }
  env.restart_count = parse_int("TORCHELASTIC_RESTART_COUNT", *attempt, Range{0, 1000000});
}

}  // namespace

EnvLookup environment_lookup() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

bool launched_by_a_launcher(const EnvLookup& lookup) {
  for (const LauncherVars& l : launchers())
    if (lookup(l.rank)) return true;
  return false;
}

bool launched_by_a_launcher() { return launched_by_a_launcher(environment_lookup()); }

RankEnv read_rank_env(const EnvLookup& lookup) {
  std::optional<RankEnv> chosen;
  for (const LauncherVars& l : launchers()) {
    if (!lookup(l.rank)) continue;
    RankEnv e;
    e.launcher = l.launcher;
    e.rank = required_int(lookup, l.rank, l.launcher, kRankRange);
    e.world_size = required_int(lookup, l.world_size, l.launcher, kSizeRange);
    read_local_ranks(lookup, l, e);
    if (e.rank >= e.world_size) {
      throw Error(std::string(l.rank) + "=" + std::to_string(e.rank) + " is out of range for " + l.world_size + "=" +
                      std::to_string(e.world_size) + " (ranks are 0 .. world size - 1)",
                  ErrorClass::ValueError);
    }
    if (e.local_world_size < 1 || e.local_world_size > e.world_size) {
      throw Error(std::string(l.local_world_size) + "=" + std::to_string(e.local_world_size) +
                      " must be between 1 and " + l.world_size + "=" + std::to_string(e.world_size),
                  ErrorClass::ValueError);
    }
    if (e.local_rank >= e.local_world_size) {
      throw Error(std::string(l.local_rank) + "=" + std::to_string(e.local_rank) + " is out of range for " +
                      l.local_world_size + "=" + std::to_string(e.local_world_size),
                  ErrorClass::ValueError);
    }
    if (chosen) {
      if (chosen->rank != e.rank || chosen->world_size != e.world_size) {
        throw Error("two launchers' variables disagree: " + chosen->launcher + " says rank " +
                        std::to_string(chosen->rank) + " of " + std::to_string(chosen->world_size) + ", " +
                        e.launcher + " says rank " + std::to_string(e.rank) + " of " + std::to_string(e.world_size) +
                        " (start the workers with one launcher)",
                    ErrorClass::ValueError);
      }
      continue;  // the first launcher's reading wins; the others agree with it
    }
    chosen = e;
  }
  if (!chosen) {
    throw Error("this process was not started by a launcher: none of RANK (torchrun, `dpv launch`), "
                "OMPI_COMM_WORLD_RANK (mpirun) or SLURM_PROCID (srun) is set",
                ErrorClass::ValueError);
  }
  std::optional<std::string> addr = lookup("MASTER_ADDR");
  if (!addr || addr->empty()) {
    throw Error("environment variable MASTER_ADDR expected, but not set (the address of the node with rank 0, "
                "where the store is hosted)",
                ErrorClass::ValueError).about_settings({"MASTER_ADDR"});
  }
  chosen->master_addr = *addr;
  std::optional<std::string> port = lookup("MASTER_PORT");
  if (!port) {
    throw Error("environment variable MASTER_PORT expected, but not set (a free TCP port on the node with rank 0)",
                ErrorClass::ValueError).about_settings({"MASTER_PORT"});
  }
  try {
    chosen->master_port = parse_int("MASTER_PORT", *port, Range{1, 65535});
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + ", a TCP port", ErrorClass::ValueError).about_settings({"MASTER_PORT"});
  }
  read_agent_store(lookup, *chosen);
  return *chosen;
}

RankEnv read_rank_env_from_environment() { return read_rank_env(environment_lookup()); }

}  // namespace dpv::dist
