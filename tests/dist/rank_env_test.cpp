// The rank variables of torchrun / `dpv launch`, mpirun and Slurm, and the errors for bad ones.
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "engine/process_groups/multiprocess/init_process_group.h"
#include "engine/process_groups/multiprocess/rank_env.h"
#include "engine/error.h"
#include "tests/support/errors.h"

namespace dpv::dist {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    read_rank_env(env_of(vars));
  } catch (const Error& e) {
    return e.full();
  }
  return "";
}

const std::map<std::string, std::string> kMaster{{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}};

std::map<std::string, std::string> with_master(std::map<std::string, std::string> vars) {
  vars.insert(kMaster.begin(), kMaster.end());
  return vars;
}

TEST(RankEnv, TorchrunVariables) {
  RankEnv e = read_rank_env(env_of(with_master(
      {{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}})));
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.master_addr, "10.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
}

// Real torchrun's agent hosts the store when it says TORCHELASTIC_USE_AGENT_STORE=True, exactly as
// PyTorch compares it; the attempt number comes from TORCHELASTIC_RESTART_COUNT.
TEST(RankEnv, TorchrunAgentStoreVariables) {
  const std::map<std::string, std::string> torchrun = with_master(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}});
  RankEnv plain = read_rank_env(env_of(torchrun));
  EXPECT_FALSE(plain.agent_store);

  auto with = [&](std::map<std::string, std::string> extra) {
    extra.insert(torchrun.begin(), torchrun.end());
    return extra;
  };
  RankEnv agent = read_rank_env(
      env_of(with({{"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "2"}})));
  EXPECT_TRUE(agent.agent_store);
  EXPECT_EQ(agent.restart_count, 2);
  for (const char* other : {"False", "true", "1", ""}) {
    RankEnv e = read_rank_env(env_of(with({{"TORCHELASTIC_USE_AGENT_STORE", other}})));
    EXPECT_FALSE(e.agent_store) << other;
  }
  EXPECT_EQ(error_of(with({{"TORCHELASTIC_USE_AGENT_STORE", "True"}})),
            "ValueError: environment variable TORCHELASTIC_RESTART_COUNT expected, but not set "
            "(TORCHELASTIC_USE_AGENT_STORE=True says torchrun's agent hosts the store; torchrun sets both)");
  EXPECT_NE(error_of(with({{"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "x"}}))
                .find("TORCHELASTIC_RESTART_COUNT='x' is not an integer"),
            std::string::npos);
}

TEST(RankEnv, MpirunVariables) {
  RankEnv e = read_rank_env(env_of(with_master({{"OMPI_COMM_WORLD_RANK", "3"},
                                                {"OMPI_COMM_WORLD_SIZE", "4"},
                                                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}})));
  EXPECT_EQ(e.launcher, "mpirun");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
}

TEST(RankEnv, SlurmVariablesWithItsTaskCountSyntax) {
  RankEnv e = read_rank_env(env_of(with_master(
      {{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "0"}, {"SLURM_NTASKS_PER_NODE", "2(x3)"}})));
  EXPECT_EQ(e.launcher, "slurm");
  EXPECT_EQ(e.rank, 4);
  EXPECT_EQ(e.world_size, 6);
  EXPECT_EQ(e.local_world_size, 2);
}

TEST(RankEnv, AgreeingLaunchersAreAccepted) {
  RankEnv e = read_rank_env(env_of(with_master({{"RANK", "1"},
                                                {"WORLD_SIZE", "2"},
                                                {"LOCAL_RANK", "1"},
                                                {"LOCAL_WORLD_SIZE", "2"},
                                                {"OMPI_COMM_WORLD_RANK", "1"},
                                                {"OMPI_COMM_WORLD_SIZE", "2"},
                                                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}})));
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 1);
}

TEST(RankEnv, ErrorsNameTheVariable) {
  EXPECT_NE(error_of(kMaster).find("not started by a launcher"), std::string::npos) << error_of(kMaster);
  std::string missing = error_of(with_master({{"RANK", "0"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"}}));
  EXPECT_NE(missing.find("ValueError: environment variable WORLD_SIZE expected, but not set"), std::string::npos)
      << missing;
  std::string bad = error_of(with_master({{"RANK", "x1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}}));
  EXPECT_NE(bad.find("RANK='x1' is not an integer: it must be a whole number from 0 to 999999"), std::string::npos) << bad;
  std::string range = error_of(with_master({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}}));
  EXPECT_NE(range.find("RANK=2 is out of range for WORLD_SIZE=2"), std::string::npos) << range;
  std::string local = error_of(with_master({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}));
  EXPECT_NE(local.find("LOCAL_RANK=2 is out of range for LOCAL_WORLD_SIZE=2"), std::string::npos) << local;
  std::string disagree = error_of(with_master({{"RANK", "1"},
                                               {"WORLD_SIZE", "2"},
                                               {"LOCAL_RANK", "1"},
                                               {"LOCAL_WORLD_SIZE", "2"},
                                               {"SLURM_PROCID", "0"},
                                               {"SLURM_NTASKS", "2"},
                                               {"SLURM_LOCALID", "0"},
                                               {"SLURM_NTASKS_PER_NODE", "2"}}));
  EXPECT_NE(disagree.find("two launchers' variables disagree"), std::string::npos) << disagree;
  std::string no_addr = error_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"}});
  EXPECT_NE(no_addr.find("MASTER_ADDR expected"), std::string::npos) << no_addr;
  std::string port = error_of({{"RANK", "0"},
                               {"WORLD_SIZE", "1"},
                               {"LOCAL_RANK", "0"},
                               {"LOCAL_WORLD_SIZE", "1"},
                               {"MASTER_ADDR", "127.0.0.1"},
                               {"MASTER_PORT", "70000"}});
  EXPECT_NE(port.find("MASTER_PORT=70000 is out of range: it must be from 1 to 65535, a TCP port"), std::string::npos)
      << port;
}

// torch.distributed.init_process_group(init_method="env://") needs RANK, WORLD_SIZE, MASTER_ADDR
// and MASTER_PORT only: a worker started with those four is accepted, as local rank 0 of its node.
TEST(RankEnv, PyTorchsFourEnvVariablesAreEnough) {
  RankEnv e = read_rank_env(env_of(with_master({{"RANK", "1"}, {"WORLD_SIZE", "2"}})));
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 2);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.local_world_size, 1);
  EXPECT_FALSE(e.local_rank_given);
  // LOCAL_RANK without LOCAL_WORLD_SIZE: the local ranks are bounded by the world size.
  e = read_rank_env(env_of(with_master({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "3"}})));
  EXPECT_EQ(e.local_rank, 3);
  EXPECT_TRUE(e.local_rank_given);
  // mpirun's and srun's variable sets stay complete or refused: those launchers always set them all.
  EXPECT_NE(error_of(with_master({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}}))
                .find("OMPI_COMM_WORLD_LOCAL_RANK expected, but not set"),
            std::string::npos);
}

// Every out-of-range value says what the range is, the world-size limit included.
TEST(RankEnv, OutOfRangeValuesNameTheirLimit) {
  auto torchrun = [](const std::string& rank, const std::string& world, const std::string& local = "0",
                     const std::string& local_world = "1") {
    return error_of(with_master({{"RANK", rank}, {"WORLD_SIZE", world}, {"LOCAL_RANK", local}, {"LOCAL_WORLD_SIZE", local_world}}));
  };
  std::string e = torchrun("0", "1000001");
  EXPECT_NE(e.find("WORLD_SIZE=1000001 is out of range: it must be from 1 to 1000000 (dpv runs at most 1000000 ranks)"),
            std::string::npos) << e;
  e = torchrun("0", "0");
  EXPECT_NE(e.find("WORLD_SIZE=0 is out of range: it must be from 1 to 1000000"), std::string::npos) << e;
  e = torchrun("-1", "2");
  EXPECT_NE(e.find("RANK=-1 is out of range: it must be from 0 to 999999"), std::string::npos) << e;
  e = torchrun("0", "99999999999999999999");
  EXPECT_NE(e.find("WORLD_SIZE=99999999999999999999 is out of range: it must be from 1 to 1000000"), std::string::npos) << e;
  e = torchrun("0", "2", "1000000", "2");
  EXPECT_NE(e.find("LOCAL_RANK=1000000 is out of range: it must be from 0 to 999999"), std::string::npos) << e;
  e = torchrun("0", "2", "0", "2000000");
  EXPECT_NE(e.find("LOCAL_WORLD_SIZE=2000000 is out of range: it must be from 1 to 1000000"), std::string::npos) << e;
  e = torchrun("0", " 2");
  EXPECT_NE(e.find("WORLD_SIZE=' 2' is not an integer"), std::string::npos) << e;
  // The largest world is accepted.
  EXPECT_EQ(read_rank_env(env_of(with_master({{"RANK", "999999"}, {"WORLD_SIZE", "1000000"}}))).world_size, 1000000);
}

TEST(DistOptions, ReadFromTheEnvironmentTheLauncherSets) {
  DistOptions o = read_dist_options(env_of({{"DPV_BACKEND", "nccl"}, {"DPV_TIMEOUT", "2.5"}, {"GLOO_SOCKET_IFNAME", "lo"}}));
  EXPECT_EQ(o.backend, "nccl");
  EXPECT_EQ(o.timeout.count(), 2500);
  EXPECT_EQ(o.iface, "lo");
  EXPECT_THROW(read_dist_options(env_of({{"DPV_BACKEND", "mpi"}})), Error);
  EXPECT_THROW(read_dist_options(env_of({{"DPV_TIMEOUT", "0"}})), Error);
  // "inf" and "1e300" used to overflow into a zero or negative timeout: an instant failure.
  for (const char* v : {"inf", "1e300", "1e10"}) {
    const Error e = testing::error_thrown_by([&] { read_dist_options(env_of({{"DPV_TIMEOUT", v}})); });
    EXPECT_NE(std::string(e.what()).find("DPV_TIMEOUT='" + std::string(v) + "': must be a finite number of seconds from 0.001 to 604800"),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dpv::dist
