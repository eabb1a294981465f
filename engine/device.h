#pragma once
// Devices and device sets. A set comes from a spec string:
//   cpu:K      K simulated devices, one thread each ("GPU 2 (simulated on CPU)")
//   cuda       every GPU;  cuda:0,1  the listed GPUs;  cuda:0x4  four virtual devices on GPU 0
// Every device of a set has its own thread (device 0's is the caller's, see HandoffPool), so
// per-replica work runs in parallel the way parallel_apply's threads do, and its own memory
// counter for the app's memory bars.
#include <atomic>
#include "engine/handoff_pool.h"
#include "engine/index.h"
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <vector>

namespace dpv {

class Backend;

enum class DeviceKind { Cpu, Cuda };

struct DeviceSpec {
  DeviceKind kind = DeviceKind::Cpu;
  int count = 1;             // number of devices in the set
  std::vector<int> gpus;     // CUDA ordinals, one per device (repeated for virtual devices)
  bool is_virtual = false;   // cuda:NxK
  std::string text;          // the spec as written
};

// Parses a device spec. Throws dpv::Error (ValueError) naming what was wrong and the accepted forms.
// Does not check that the GPUs exist; DeviceSet::create does.
DeviceSpec parse_device_spec(const std::string& text);

struct MemoryCounter {
  std::atomic<int64_t> current{0};
  std::atomic<int64_t> peak{0};
  void add(int64_t bytes);
  void sub(int64_t bytes) { current.fetch_sub(bytes); }
  void reset_peak() { peak.store(current.load()); }
};

// One worker thread with a FIFO of jobs (a DDP rank's communication thread).
class DeviceWorker {
 public:
  DeviceWorker();
  ~DeviceWorker();
  DeviceWorker(const DeviceWorker&) = delete;
  DeviceWorker& operator=(const DeviceWorker&) = delete;
  void submit(std::function<void()> job);

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::queue<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

class Device {
 public:
  Device(int index, DeviceKind kind, int physical, bool is_virtual, std::unique_ptr<Backend> backend);
  ~Device();
  int index() const { return index_; }             // position in the set: "device d"
  DeviceKind kind() const { return kind_; }
  int physical() const { return physical_; }       // CUDA ordinal, -1 for CPU devices
  bool is_virtual() const { return is_virtual_; }
  const std::string& label() const { return label_; }   // "GPU 1 (simulated on CPU)": display_name (detail)
  const std::string& display_name() const { return display_name_; }  // "GPU 1"
  const std::string& detail() const { return detail_; }  // "simulated on CPU", the GPU's name, ...; "" for none
  std::string name() const;                        // "cpu:1", "cuda:0", "cuda:0#2"
  Backend& backend() const { return *backend_; }
  MemoryCounter& memory() { return memory_; }
  // What the device really is, shown after its name: "GPU 1 (<detail>)".
  void set_detail(std::string detail);

 private:
  int index_;
  DeviceKind kind_;
  int physical_;
  bool is_virtual_;
  std::string display_name_;
  std::string detail_;
  std::string label_;
  std::unique_ptr<Backend> backend_;
  MemoryCounter memory_;
};

class DeviceSet {
 public:
  // Builds the devices of a spec. Throws dpv::Error when CUDA is asked for and not available
  // ("CUDA is not available: this build has no CUDA backend; use --devices cpu:K").
  static std::shared_ptr<DeviceSet> create(const std::string& spec);
  // cpu:K made with the given backends, one per device (a test's wrapper around the CPU backend).
  static std::shared_ptr<DeviceSet> create_simulated(std::vector<std::unique_ptr<Backend>> backends);
  // cuda:0xK made with the given backends: devices of kind Cuda whose backends are a test's stand-in
  // for a GPU (the CPU backend behind queues of its own), so GPU control flow runs without a GPU.
  static std::shared_ptr<DeviceSet> create_simulated_gpus(std::vector<std::unique_ptr<Backend>> backends);
  int size() const { return static_cast<int>(devices_.size()); }
  Device& operator[](int i) const { return *devices_.at(ix(i)); }
  std::shared_ptr<Device> shared(int i) const { return devices_.at(ix(i)); }
  const DeviceSpec& spec() const { return spec_; }
  // Jobs that move fewer bytes than this in all run inline, one after another, when the caller says
  // they may (bytes_moved below): a hand-off to the device threads costs more than the copy.
  static constexpr int64_t kInlineBytes = 64 * 1024;
  // bytes_moved for independent jobs whose size is not a copy's (a replica's forward or backward).
  static constexpr int64_t kIndependentWork = std::numeric_limits<int64_t>::max();
  // Runs fn(i) for i in [0, count) on device i's thread (device 0's is the calling thread) and
  // waits for all of them; a single job runs inline, as parallel_apply runs a single replica.
  // bytes_moved >= 0 declares independent jobs (none waits for another) moving that many bytes in
  // all: below kInlineBytes they run inline in the calling thread, and on simulated (CPU) devices
  // the calling thread also runs those whose device thread has not started yet (HandoffPool's
  // stealing: a CPU device's work may run on any thread). -1: jobs that may wait for one another,
  // always each on its device's thread.
  // If some fail, rethrows the lowest index's exception (as parallel_apply re-raises the
  // lowest failing replica), after every job has finished.
  void run_parallel(int count, const std::function<void(int)>& fn, int64_t bytes_moved = -1) const;
  // Same, but returns each index's exception (null where it succeeded) instead of throwing.
  std::vector<std::exception_ptr> run_parallel_collect(int count, const std::function<void(int)>& fn,
                                                       int64_t bytes_moved = -1) const;

 private:
  DeviceSpec spec_;
  std::vector<std::shared_ptr<Device>> devices_;
  std::unique_ptr<HandoffPool> pool_;  // threads of devices 1..K-1, made with the set
};

// What `dpv devices` prints: CPU workers, CUDA devices, NCCL version, build flags.
std::string describe_machine();
}  // namespace dpv
