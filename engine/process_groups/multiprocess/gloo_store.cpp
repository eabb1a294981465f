#include "engine/process_groups/multiprocess/gloo_store.h"

#include "engine/process_groups/multiprocess/store.h"

namespace dpv::dist {

void GlooStore::set(const std::string& key, const std::vector<char>& data) { store_.set(key, data); }
std::vector<char> GlooStore::get(const std::string& key) { return store_.get(key); }
void GlooStore::wait(const std::vector<std::string>& keys) { store_.wait(keys); }
void GlooStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  store_.wait(keys, timeout);
}

}  // namespace dpv::dist
