#include "engine/device.h"

#include <charconv>
#include <algorithm>
#include <sstream>

#include "engine/backend.h"
#include "engine/error.h"
#include "engine/free_cores.h"
#include "engine/index.h"

namespace dpv {

namespace {

constexpr int kMaxDevices = 64;

const char* kSpecForms =
    "expected cpu:K (K simulated devices, 1..64), cuda (every GPU), cuda:0,1 (listed GPUs) or cuda:0xK "
    "(K virtual devices on GPU 0)";

[[noreturn]] void bad_spec(const std::string& text, const std::string& why) {
  throw Error("invalid device spec '" + text + "': " + why + "; " + kSpecForms, ErrorClass::ValueError);
}

int parse_int(const std::string& text, const std::string& part) {
  int value = -1;
  auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
  if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || value < 0)
    bad_spec(text, "'" + part + "' is not a non-negative integer");
  return value;
}

}  // namespace

DeviceSpec parse_device_spec(const std::string& text) {
  DeviceSpec spec;
  spec.text = text;
  if (text == "cpu") {
    spec.kind = DeviceKind::Cpu;
    spec.count = 1;
    return spec;
  }
  if (text.rfind("cpu:", 0) == 0) {
    spec.kind = DeviceKind::Cpu;
    spec.count = parse_int(text, text.substr(4));
    if (spec.count < 1 || spec.count > kMaxDevices) bad_spec(text, "the device count must be 1 to 64");
    return spec;
  }
  if (text == "cuda") {
    spec.kind = DeviceKind::Cuda;
    spec.count = 0;  // every GPU: filled in by DeviceSet::create
    return spec;
  }
  if (text.rfind("cuda:", 0) == 0) {
    spec.kind = DeviceKind::Cuda;
    std::string rest = text.substr(5);
    if (auto x = rest.find('x'); x != std::string::npos) {
      int gpu = parse_int(text, rest.substr(0, x));
      int k = parse_int(text, rest.substr(x + 1));
      if (k < 1 || k > kMaxDevices) bad_spec(text, "the virtual device count must be 1 to 64");
      spec.gpus.assign(ix(k), gpu);
      spec.is_virtual = true;
    } else {
      std::stringstream ss(rest);
      std::string part;
      while (std::getline(ss, part, ',')) {
        int gpu = parse_int(text, part);
        for (int g : spec.gpus)
          if (g == gpu) bad_spec(text, "GPU " + part + " is listed twice (use cuda:" + part + "xK for virtual devices)");
        spec.gpus.push_back(gpu);
      }
      if (spec.gpus.empty()) bad_spec(text, "no GPU listed");
    }
    spec.count = static_cast<int>(spec.gpus.size());
    return spec;
  }
  bad_spec(text, text.empty() ? "it is empty" : "unknown device kind");
}

void MemoryCounter::add(int64_t bytes) {
  int64_t now = current.fetch_add(bytes) + bytes;
  int64_t seen = peak.load();
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
}

DeviceWorker::DeviceWorker() : thread_([this] { loop(); }) {}

DeviceWorker::~DeviceWorker() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void DeviceWorker::submit(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push(std::move(job));
  }
  cv_.notify_one();
}

void DeviceWorker::loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stop requested and nothing left
      job = std::move(jobs_.front());
      jobs_.pop();
    }
    job();
  }
}

Device::Device(int index, DeviceKind kind, int physical, bool is_virtual, std::unique_ptr<Backend> backend)
    : index_(index), kind_(kind), physical_(physical), is_virtual_(is_virtual), backend_(std::move(backend)) {
  display_name_ = "GPU " + std::to_string(index);
  set_detail(kind == DeviceKind::Cpu ? "simulated on CPU" : "");
}

void Device::set_detail(std::string detail) {
  detail_ = std::move(detail);
  label_ = detail_.empty() ? display_name_ : display_name_ + " (" + detail_ + ")";
}

Device::~Device() = default;

std::string Device::name() const {
  if (kind_ == DeviceKind::Cpu) return "cpu:" + std::to_string(index_);
  std::string n = "cuda:" + std::to_string(physical_);
  if (is_virtual_) {
    n.push_back('#');  // appended piecewise: GCC 12 warns falsely (-Wrestrict) on "#" + to_string
    n.append(std::to_string(index_));
  }
  return n;
}

// DeviceSet::create and describe_machine, which may need the CUDA target, are in the backends
// target: engine/backends/device_set_create.cpp.

std::shared_ptr<DeviceSet> DeviceSet::create_simulated(std::vector<std::unique_ptr<Backend>> backends) {
  auto set = std::make_shared<DeviceSet>();
  set->spec_ = parse_device_spec("cpu:" + std::to_string(backends.size()));
  for (size_t i = 0; i < backends.size(); ++i) {
    check(backends[i] != nullptr, "create_simulated: no backend for device " + std::to_string(i));
    set->devices_.push_back(std::make_shared<Device>(static_cast<int>(i), DeviceKind::Cpu, -1, false, std::move(backends[i])));
  }
  set->pool_ = std::make_unique<HandoffPool>(std::max(set->size() - 1, 0));
  return set;
}

std::shared_ptr<DeviceSet> DeviceSet::create_simulated_gpus(std::vector<std::unique_ptr<Backend>> backends) {
  auto set = std::make_shared<DeviceSet>();
  set->spec_ = parse_device_spec("cuda:0x" + std::to_string(backends.size()));
  for (size_t i = 0; i < backends.size(); ++i) {
    check(backends[i] != nullptr, "create_simulated_gpus: no backend for device " + std::to_string(i));
    set->devices_.push_back(std::make_shared<Device>(static_cast<int>(i), DeviceKind::Cuda, 0, true, std::move(backends[i])));
  }
  set->pool_ = std::make_unique<HandoffPool>(std::max(set->size() - 1, 0));
  return set;
}

std::vector<std::exception_ptr> DeviceSet::run_parallel_collect(int count, const std::function<void(int)>& fn,
                                                                int64_t bytes_moved) const {
  if (count > size())  // every stage passes here: the message is built only when thrown
    throw Error("run_parallel: " + std::to_string(count) + " jobs for " + std::to_string(size()) + " devices");
  std::vector<std::exception_ptr> errors(ix(std::max(count, 0)));
  const std::function<void(int)> job = [&](int i) {
    try {
      fn(i);
    } catch (...) {
      errors[ix(i)] = std::current_exception();
    }
  };
  // A single job runs inline as parallel_apply runs a single replica: no thread hop.
  if (count <= 1 || (bytes_moved >= 0 && bytes_moved < kInlineBytes))
    HandoffPool::run_inline(count, job);
  else if (bytes_moved >= 0 && spec_.kind == DeviceKind::Cpu)  // independent jobs: at most a thread per CPU
    pool_->run(count, job, true, std::min(count, static_cast<int>(FreeCores::usable_cpus())));
  else
    pool_->run(count, job);
  return errors;
}

void DeviceSet::run_parallel(int count, const std::function<void(int)>& fn, int64_t bytes_moved) const {
  for (auto& e : run_parallel_collect(count, fn, bytes_moved))
    if (e) std::rethrow_exception(e);
}

}  // namespace dpv
