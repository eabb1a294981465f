#pragma once
// The rendezvous key-value store, as torch.distributed's TCPStore: rank 0 hosts it at
// MASTER_ADDR:MASTER_PORT, every rank (rank 0 included) joins it as a client. Ranks use it to
// exchange addresses (Gloo), the NCCL unique id, and to count who has arrived.
//
// Every call that waits has a deadline and its error names the key it waited for, so a missing
// rank turns into "timed out after 30 s waiting for key 'x' in the store at ..." instead of a hang.
// Joining checks the world size against rank 0's: a mismatch is an error naming both values, for
// the joining rank and (the job cannot form) for every rank waiting in the store, at once.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/process_groups/multiprocess/socket.h"
#include "engine/process_groups/multiprocess/store.h"

namespace dpv::dist {

// The server: one thread accepting, one thread per client. Stops (and drops its clients) on destruction.
class TcpStoreServer {
 public:
  // Binds host:port (port 0: any free port; see port()). world_size is what joining clients must match.
  TcpStoreServer(const std::string& host, int port, int world_size);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const { return port_; }
  // How many clients are blocked in a get or wait for keys not yet set (what tests wait for).
  int waiting() const { return waiting_.load(); }
  // How many client connections are open: one closes (its socket, its thread ended) as soon as
  // its client leaves, so connect/close cycles do not pile up descriptors.
  int open_connections() const;

 private:
  // One client: its socket and the thread serving it; done once the client left and the socket closed.
  struct Connection {
    Socket socket;
    std::thread thread;
    bool done = false;  // guarded by mutex_
  };
  void accept_loop();
  // Serves one connection until its client leaves, then closes it and marks it done.
  void serve(Connection* connection);
  void serve_requests(Socket* client);
  // Waits (under lock) until every key exists or the deadline passes; false on timeout.
  bool wait_for(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys, Clock::time_point deadline);

  Socket listener_;
  int port_ = 0;
  int world_size_ = 0;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Bytes> data_;
  bool stopping_ = false;
  std::string abort_reason_;  // set when a rank with another world size was refused: every wait fails with it
  std::atomic<int> waiting_{0};
  std::list<std::unique_ptr<Connection>> connections_;
  std::thread acceptor_;
};

// A client connection. Not thread-safe: one per thread, or guarded by the caller.
class TcpStore : public Store {
 public:
  // Connects (retrying until `timeout`) and checks that the server's world size is world_size.
  TcpStore(const std::string& host, int port, int world_size, std::chrono::milliseconds timeout);
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::string& key) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  std::chrono::milliseconds timeout() const override { return timeout_; }
  const std::string& where() const override { return where_; }

 private:
  Bytes request(uint8_t command, const std::vector<std::string>& args, const Bytes& value, int64_t number,
                std::chrono::milliseconds wait_timeout, const std::string& awaited);

  Socket socket_;
  std::string where_;  // "the store at 127.0.0.1:29500"
  std::chrono::milliseconds timeout_;
};

}  // namespace dpv::dist
