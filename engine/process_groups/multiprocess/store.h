#pragma once
// The key-value store ranks meet through, as torch.distributed's c10d::Store: set, get, add, check
// and wait. Two implementations: dpv's own TCP store, hosted by rank 0 (tcp_store.h), and a client
// of PyTorch's TCPStore for workers of real torchrun, whose agent hosts the store (c10d_store.h).
// The process group bootstrap (Gloo's rendezvous, the NCCL unique id, counting ranks) sees only this.
//
// Every call that waits has a deadline, and its error names the key and the store's address.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dpv::dist {

using Bytes = std::vector<char>;

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits for the key (up to timeout()) and returns its value.
  virtual Bytes get(const std::string& key) = 0;
  // Adds delta to the integer stored at key (0 when absent) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // True when the key exists, without waiting.
  virtual bool check(const std::string& key) = 0;
  // Waits until every key exists; throws dpv::Error naming the missing keys after `timeout`.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }
  virtual std::chrono::milliseconds timeout() const = 0;
  // "the store at 127.0.0.1:29500", for messages.
  virtual const std::string& where() const = 0;
};

Bytes to_bytes(const std::string& text);
std::string to_string(const Bytes& bytes);
// "'a', 'b'" and "key 'a'" or "keys 'a', 'b'", for messages.
std::string quoted_keys(const std::vector<std::string>& keys);
std::string describe_keys(const std::vector<std::string>& keys);

}  // namespace dpv::dist
