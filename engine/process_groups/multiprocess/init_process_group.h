#pragma once
// torch.distributed.init_process_group("gloo" | "nccl", init_method="env://") for dpv workers:
// reads the rank variables (rank_env.h), hosts the store on rank 0 and joins it on every rank (or,
// under real torchrun, joins its agent's PyTorch TCPStore: c10d_store.h), then builds the process
// group of the chosen backend over it.
//
// `dpv launch` passes its options to the workers in the environment: DPV_BACKEND (gloo | nccl),
// DPV_TIMEOUT (seconds) and GLOO_SOCKET_IFNAME. Workers started by mpirun or srun read the same.
#include <chrono>
#include <memory>
#include <string>

#include "engine/process_groups/multiprocess/process_group_backend.h"
#include "engine/process_groups/multiprocess/rank_env.h"
#include "engine/process_groups/multiprocess/tcp_store.h"
#include "engine/process_groups/process_group.h"

namespace dpv {
class Device;
class DeviceSet;
}  // namespace dpv

namespace dpv::dist {

struct DistOptions {
  ProcessGroupBackend backend = ProcessGroupBackend::Gloo;
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  std::string iface;  // empty: the interface that routes to MASTER_ADDR
};

// DPV_BACKEND, DPV_TIMEOUT and GLOO_SOCKET_IFNAME, with the defaults above; throws dpv::Error for bad values.
DistOptions read_dist_options(const EnvLookup& lookup);

// This rank's membership of the job. Destroy it only after shutdown() (or on an error path).
class DistSession {
 public:
  const RankEnv& env() const { return env_; }
  ProcessGroup& group() { return *group_; }
  Store& store() { return *store_; }
  const DistOptions& options() const { return options_; }
  // With NCCL, this rank's GPU (cuda:LOCAL_RANK), where the group's tensors must live; null with
  // Gloo (host memory). The session owns it so the group is always destroyed first: NCCL's
  // communicator must go before the device and stream its collectives ran on.
  const std::shared_ptr<DeviceSet>& devices() const { return devices_; }
  std::shared_ptr<Device> device() const;
  // Every rank says it is done; the rank hosting the store keeps it up until all have (bounded by
  // the timeout). Under torchrun's agent store nobody waits: the agent outlives its workers.
  void shutdown();
  ~DistSession();

 private:
  friend std::unique_ptr<DistSession> init_process_group(const RankEnv&, const DistOptions&);
  RankEnv env_;
  DistOptions options_;
  std::unique_ptr<TcpStoreServer> server_;  // rank 0 only, and not under torchrun's agent store
  std::unique_ptr<Store> store_;
  std::unique_ptr<ProcessGroup> group_;
  std::shared_ptr<DeviceSet> devices_;  // NCCL only: this rank's GPU, destroyed after group_
};

std::unique_ptr<DistSession> init_process_group(const RankEnv& env, const DistOptions& options);

// The port rank 0's store will listen on at host:port, checked free now by binding it once (port 0:
// one the system picks), so a launcher reports a port in use before any worker starts. Throws
// dpv::Error for an address that is not this machine's or a port in use, saying what to do.
int check_store_port(const std::string& host, int port);
// Both from the environment: what a worker started by `dpv launch`, mpirun or srun calls.
std::unique_ptr<DistSession> init_process_group_from_environment();

}  // namespace dpv::dist
