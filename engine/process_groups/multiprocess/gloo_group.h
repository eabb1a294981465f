#pragma once
// The Gloo process group: ProcessGroup over a gloo::rendezvous::Context whose ranks meet through
// the rendezvous store (store.h) and then talk over Gloo's TCP transport, as torch.distributed's
// "gloo" backend.
// All-reduce uses Gloo's chunked ring on pairs in synchronous mode, and from 8 MiB among three
// ranks or more Gloo's asynchronous ring (gloo_group.cpp says why);
// broadcast, all-gather and barrier Gloo's own collectives.
// Only this target (dpv_dist) sees Gloo's headers.
#include <chrono>
#include <memory>
#include <string>

#include "engine/process_groups/process_group.h"

namespace dpv::dist {

class Store;

struct GlooOptions {
  // The network interface to use ("eth0"); GLOO_SOCKET_IFNAME's role. Empty: the address this
  // machine uses to reach `master_addr`.
  std::string iface;
  std::string master_addr = "127.0.0.1";
  std::chrono::milliseconds timeout{30000};  // connecting, and every collective
  std::string prefix = "gloo";               // store keys of this group start with it
};

// Joins the group (collective: every rank calls it with the same prefix). Throws dpv::Error when
// a peer does not arrive within the timeout or the interface does not exist.
std::unique_ptr<ProcessGroup> make_gloo_group(Store& store, int rank, int world_size, const GlooOptions& options);

}  // namespace dpv::dist
