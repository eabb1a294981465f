#pragma once
// The rendezvous store (store.h) seen as a gloo::rendezvous::Store, so Gloo's rendezvous (each rank publishing its
// transport address, then reading everyone's) runs over our store. Waits keep their deadlines.
#include <chrono>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

namespace dpv::dist {

class Store;

class GlooStore : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(dist::Store& store) : store_(store) {}
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  dist::Store& store_;  // qualified: inside this class, Store names Gloo's base
};

}  // namespace dpv::dist
