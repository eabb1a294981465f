// The device sets that may hold GPUs, and the machine's description: the part of engine/device.h
// that needs the CUDA target, so it lives in the backends target (engine/device.cpp is the rest).
#include <algorithm>
#include <sstream>
#include <thread>

#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/backends/install_gpu_collectives.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/index.h"

namespace dpv {

std::shared_ptr<DeviceSet> DeviceSet::create(const std::string& text) {
  auto set = std::make_shared<DeviceSet>();
  set->spec_ = parse_device_spec(text);
  DeviceSpec& spec = set->spec_;
  if (spec.kind == DeviceKind::Cpu) {
    for (int i = 0; i < spec.count; ++i)
      set->devices_.push_back(std::make_shared<Device>(i, DeviceKind::Cpu, -1, false, make_cpu_backend()));
    set->pool_ = std::make_unique<HandoffPool>(std::max(spec.count - 1, 0));
    return set;
  }
  if (!cuda_available())
    throw Error("CUDA is not available for device spec '" + text + "'" +
                (!cuda_compiled_in()
                     ? ": this build has no CUDA backend"
                     : ": no usable GPU was found (" + cuda_build_info() + ")") +
                "; use the device spec cpu:K for simulated devices");
  install_gpu_collectives();  // before the set exists: its DataParallel needs the GPU collectives
  int available = cuda_device_count();
  if (spec.gpus.empty()) {
    for (int g = 0; g < available; ++g) spec.gpus.push_back(g);
    spec.count = available;
  }
  for (int g : spec.gpus)
    if (g >= available)
      throw Error("device spec '" + text + "' names GPU " + std::to_string(g) + " but this machine has " +
                      std::to_string(available) + " GPU" + (available == 1 ? "" : "s") + " (0.." +
                      std::to_string(available - 1) + ")",
                  ErrorClass::ValueError);
  for (int i = 0; i < spec.count; ++i) {
    int gpu = spec.gpus[ix(i)];
    auto dev = std::make_shared<Device>(i, DeviceKind::Cuda, gpu, spec.is_virtual, make_cuda_backend(gpu, i));
    std::string name = cuda_device_name(gpu);
    dev->set_detail(spec.is_virtual ? "virtual, on " + name + " #" + std::to_string(gpu) : name);
    set->devices_.push_back(std::move(dev));
  }
  set->pool_ = std::make_unique<HandoffPool>(std::max(spec.count - 1, 0));
  return set;
}

std::string describe_machine() {
  std::ostringstream out;
  unsigned cores = std::thread::hardware_concurrency();
  out << "CPU: " << cores << " hardware thread" << (cores == 1 ? "" : "s")
      << "; simulated devices: cpu:K (K = 1..64, one worker thread each, OpenBLAS single-threaded per device)\n";
  out << "CUDA: " << cuda_build_info() << "\n";
  if (cuda_available()) {
    int n = cuda_device_count();
    for (int g = 0; g < n; ++g) out << "  cuda:" << g << "  " << cuda_device_name(g) << "\n";
  } else {
    out << "  no GPU available: use the device spec cpu:K for simulated devices\n";
  }
  return out.str();
}

}  // namespace dpv
