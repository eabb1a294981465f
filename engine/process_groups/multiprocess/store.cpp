#include "engine/process_groups/multiprocess/store.h"

namespace dpv::dist {

Bytes to_bytes(const std::string& text) { return Bytes(text.begin(), text.end()); }
std::string to_string(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

std::string quoted_keys(const std::vector<std::string>& keys) {
  std::string text;
  for (const std::string& k : keys) text += (text.empty() ? "'" : ", '") + k + "'";
  return text;
}

std::string describe_keys(const std::vector<std::string>& keys) {
  return (keys.size() == 1 ? "key " : "keys ") + quoted_keys(keys);
}

}  // namespace dpv::dist
