#include "engine/netmodel/net_admin.h"

#include <cstdlib>
#include <fstream>
#include <string>

namespace dpv::netmodel {

bool has_net_admin() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const unsigned long long caps = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (caps >> 12) & 1ULL;
  }
  return false;
}

}  // namespace dpv::netmodel
