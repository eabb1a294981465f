#include "engine/process_groups/multiprocess/init_process_group.h"

#include "engine/backend_registry.h"
#include "engine/device.h"
#include "engine/process_groups/multiprocess/c10d_store.h"
#include "engine/process_groups/multiprocess/gloo_group.h"
#include "engine/process_groups/multiprocess/socket.h"
#include "engine/error.h"
#include "engine/process_groups/seconds.h"

namespace dpv::dist {

DistOptions read_dist_options(const EnvLookup& lookup) {
  DistOptions o;
  if (auto b = lookup("DPV_BACKEND")) {
    try {
      o.backend = parse_process_group_backend(*b);
    } catch (const Error& e) {
      throw e.reworded("DPV_BACKEND=" + std::string(e.what()));  // DPV_BACKEND='mpi' is not a backend: ...
    }
  }
  if (auto t = lookup("DPV_TIMEOUT")) {
    try {
      o.timeout = seconds_to_ms(parse_seconds(*t, "DPV_TIMEOUT", kTimeoutSeconds));
    } catch (const Error& e) {
      throw Error(e.what(), e.error_class()).about_settings({"DPV_TIMEOUT"});
    }
  }
  if (auto i = lookup("GLOO_SOCKET_IFNAME")) o.iface = *i;
  return o;
}

namespace {

std::string done_key(int rank) { return "dpv/done/" + std::to_string(rank); }

// As torch.distributed's _create_c10d_store: under torchrun's agent store every rank joins the
// agent's TCPStore, with its keys under this attempt's prefix; otherwise rank 0 hosts dpv's store.
std::unique_ptr<Store> join_store(const RankEnv& env, const DistOptions& options,
                                  std::unique_ptr<TcpStoreServer>& server) {
  if (env.agent_store) {
    return std::make_unique<C10dStoreClient>(env.master_addr, env.master_port, options.timeout,
                                             torchelastic_worker_prefix(env.restart_count));
  }
  if (env.rank == 0) server = std::make_unique<TcpStoreServer>(env.master_addr, env.master_port, env.world_size);
  return std::make_unique<TcpStore>(env.master_addr, env.master_port, env.world_size, options.timeout);
}

}  // namespace

std::unique_ptr<DistSession> init_process_group(const RankEnv& env, const DistOptions& options) {
  auto s = std::unique_ptr<DistSession>(new DistSession());
  s->env_ = env;
  s->options_ = options;
  s->store_ = join_store(env, options, s->server_);
  // Two processes claiming one rank would deadlock Gloo's rendezvous; the store counts claims.
  if (s->store_->add("dpv/rank/" + std::to_string(env.rank), 1) != 1) {
    throw Error("two processes were started as rank " + std::to_string(env.rank) +
                " (check the node rank, GROUP_RANK, on every node: each node needs its own)").about_settings({"GROUP_RANK"});
  }
  if (options.backend == ProcessGroupBackend::Nccl) {
    Store* store = s->store_.get();
    s->group_ = make_nccl_process_group(
        env.rank, env.world_size, env.local_rank, options.timeout.count(),
        [store](const std::string& key, const std::vector<char>& value) { store->set(key, value); },
        [store](const std::string& key) { return store->get(key); });
    s->devices_ = DeviceSet::create("cuda:" + std::to_string(env.local_rank));  // after the group's cudaSetDevice
  } else {
    GlooOptions g;
    g.iface = options.iface;
    g.master_addr = env.master_addr;
    g.timeout = options.timeout;
    s->group_ = make_gloo_group(*s->store_, env.rank, env.world_size, g);
  }
  return s;
}

int check_store_port(const std::string& host, int port) { return bound_port(listen_tcp(host, port)); }

std::unique_ptr<DistSession> init_process_group_from_environment() {
  EnvLookup lookup = environment_lookup();
  RankEnv env = read_rank_env(lookup);
  return init_process_group(env, read_dist_options(lookup));
}

void DistSession::shutdown() {
  // Each rank says it is done under its own key: a counter one key wide could be bumped by any
  // client of the store and end the job early (or, set to text, make every add fail).
  store_->set(done_key(env_.rank), to_bytes("done"));
  if (!server_) return;  // only the rank hosting the store waits, so it outlives the others' last call
  std::vector<std::string> keys;
  for (int r = 0; r < env_.world_size; ++r) keys.push_back(done_key(r));
  try {
    store_->wait(keys, options_.timeout);
  } catch (const Error& e) {
    std::string missing;
    for (int r = 0; r < env_.world_size; ++r)
      if (!store_->check(done_key(r))) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    throw e.reworded("rank(s) " + missing + " did not finish: " + e.what());
  }
}

std::shared_ptr<Device> DistSession::device() const { return devices_ ? devices_->shared(0) : nullptr; }

DistSession::~DistSession() {
  // The transport first (NCCL's communicator is finalized on the rank's stream), then the device
  // it ran on, then the store it met through.
  group_.reset();
  devices_.reset();
  store_.reset();
  server_.reset();
}

}  // namespace dpv::dist
