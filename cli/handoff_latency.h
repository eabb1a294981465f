#pragma once
// The hand-off latency of a device set: how long DeviceSet::run_parallel takes when every job is
// empty, i.e. what waking the devices' threads and waiting for them costs per stage. `dpv bench`
// prints it for each multi-device set.
#include <string>

namespace dpv::cli {

struct HandoffLatency {
  std::string devices;
  int calls = 0;
  double median_us = 0, p90_us = 0;
};

// Times `calls` back-to-back run_parallel calls with one empty job per device (never inlined).
HandoffLatency measure_handoff(const std::string& device_spec, int calls = 2000);

}  // namespace dpv::cli
