#include "cli/handoff_latency.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/device.h"

namespace dpv::cli {

HandoffLatency measure_handoff(const std::string& device_spec, int calls) {
  auto devices = DeviceSet::create(device_spec);
  const int k = devices->size();
  for (int i = 0; i < 50; ++i) devices->run_parallel(k, [](int) {});  // threads started and warm
  std::vector<double> us;
  us.reserve(static_cast<size_t>(calls));
  for (int i = 0; i < calls; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    devices->run_parallel(k, [](int) {});
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  HandoffLatency h;
  h.devices = device_spec;
  h.calls = calls;
  h.median_us = us[us.size() / 2];
  h.p90_us = us[us.size() * 9 / 10];
  return h;
}

}  // namespace dpv::cli
