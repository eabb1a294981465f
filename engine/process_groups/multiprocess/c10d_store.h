#pragma once
// A client of PyTorch's own key-value store, torch.distributed.TCPStore (c10d::TCPStore), speaking
// its wire protocol as of PyTorch 1.13. Real torchrun's elastic agent hosts such a store at
// MASTER_ADDR:MASTER_PORT and tells its workers with TORCHELASTIC_USE_AGENT_STORE=True; every
// worker, rank 0 included, then joins it as a client instead of hosting one (the port is taken).
//
// The protocol, as PyTorch 1.13's TCPStore client and daemon use it: a request is one query byte
// followed by its arguments, strings and byte vectors as a 64-bit length and the bytes, integers
// as 8 bytes, all in the machine's own byte order (PyTorch sends native integers). Answers are a
// byte vector, an integer or one status byte; SET has no answer, and the store answers WAIT only
// once every key exists, so the client enforces the timeout. The store drops a client that GETs a
// missing key, which is why get() waits first, as PyTorch's client does.
//
// Keys: PyTorch's TCPStore client puts "/" before every key, and its workers under torchrun wrap
// the store in PrefixStore("/worker/attempt_<TORCHELASTIC_RESTART_COUNT>"), so a restarted
// attempt never sees the keys of the one before. This client does the same, so dpv's keys sit
// where a PyTorch worker's would: "dpv/done/1" travels as "//worker/attempt_0/dpv/done/1".
//
// Every call has a deadline (the timeout); a length from the wire above kMaxC10dValueBytes is
// refused before anything is allocated. After any failure the connection's state is unknown, so it
// is closed and the next call connects again.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/process_groups/multiprocess/socket.h"
#include "engine/process_groups/multiprocess/store.h"
#include "engine/error.h"

namespace dpv::dist {

// Far above any rendezvous value (addresses, the NCCL id, counters), far below a memory problem.
inline constexpr uint64_t kMaxC10dValueBytes = 64ull << 20;

// The prefix PyTorch's workers give their keys in torchrun's agent store: "/worker/attempt_<n>".
std::string torchelastic_worker_prefix(int restart_count);

class C10dStoreClient : public Store {
 public:
  // Connects to host:port (retrying until `timeout`) and, as PyTorch's workers do on joining, adds
  // 1 to the store's join counter "init/". `prefix` namespaces every key as PyTorch's
  // PrefixStore(prefix, store) does (empty: none). `name` is what messages call the store.
  C10dStoreClient(const std::string& host, int port, std::chrono::milliseconds timeout, std::string prefix,
                  const std::string& name = "torchrun's agent store");
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::string& key) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  std::chrono::milliseconds timeout() const override { return timeout_; }
  const std::string& where() const override { return where_; }
  // The key as it travels: "/" + prefix + "/" + key (or "/" + key without a prefix).
  std::string wire_key(const std::string& key) const;

 private:
  void ensure_connected();
  void send(const Bytes& request, Clock::time_point deadline, const std::string& action);
  template <typename T>
  T receive(Clock::time_point deadline, const std::string& action);
  Bytes receive_bytes(Clock::time_point deadline, const std::string& action);
  int64_t add_wire_key(const std::string& wire, int64_t delta, const std::string& action);
  // Closes the connection (its state is unknown after an error) and returns the error to throw.
  Error broken(const std::string& message);

  std::string host_;
  int port_ = 0;
  std::chrono::milliseconds timeout_;
  std::string prefix_;
  std::string where_;  // "torchrun's agent store at 127.0.0.1:29500"
  Socket socket_;
};

}  // namespace dpv::dist
