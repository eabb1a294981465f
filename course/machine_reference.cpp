// The machine's reference speed-up for K independent GEMM workers (see machine_reference.h).
#include "course/machine_reference.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "engine/error.h"
#include "engine/model.h"

namespace dpv::course {
namespace {

using Clock = std::chrono::steady_clock;

// `workers` threads, each with its own operands, run passes from one shared start until one shared
// deadline; the rate is every pass they finished over the time from the start to the last finish.
// One clock for all: a thread the scheduler leaves waiting (more workers than cores) is not given
// a window of its own, so the rate cannot exceed what the cores did.
double passes_per_second(int workers, const std::vector<GemmShape>& shapes, double seconds) {
  std::vector<std::unique_ptr<GemmReference>> refs;
  for (int w = 0; w < workers; ++w)
    refs.push_back(std::make_unique<GemmReference>(shapes, /*float64=*/false, GemmLibrary::EngineCpu));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  Clock::time_point start, deadline;
  std::vector<int64_t> passes(static_cast<size_t>(workers), 0);
  std::vector<Clock::time_point> finished(static_cast<size_t>(workers));
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      GemmReference& ref = *refs[static_cast<size_t>(w)];
      ref.time_one_pass();  // warm: operands in cache, the library's first-call set-up done
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      int64_t n = 0;
      auto now = Clock::now();
      while (now < deadline) {
        ref.time_one_pass();
        ++n;
        now = Clock::now();
      }
      passes[static_cast<size_t>(w)] = n;
      finished[static_cast<size_t>(w)] = now;
    });
  while (ready.load() < workers) std::this_thread::yield();
  start = Clock::now();
  deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  go.store(true, std::memory_order_release);  // publishes start and deadline
  for (auto& t : threads) t.join();
  int64_t total = 0;
  Clock::time_point last = start;
  for (int w = 0; w < workers; ++w) {
    total += passes[static_cast<size_t>(w)];
    last = std::max(last, finished[static_cast<size_t>(w)]);
  }
  const double window = std::chrono::duration<double>(last - start).count();
  return window > 0 ? static_cast<double>(total) / window : 0;
}

}  // namespace

std::vector<GemmShape> machine_reference_shapes() { return mlp_step_gemms(preset_model("mlp-large"), 256); }

MachineReference measure_machine_reference(int workers, const std::vector<GemmShape>& shapes, double seconds, int rounds) {
  check(workers >= 1, "the machine reference needs at least one worker, got " + std::to_string(workers));
  MachineReference r;
  r.workers = workers;
  // Alternating one and all, so a change in the machine's load falls on both; the best of each.
  for (int round = 0; round < std::max(1, rounds); ++round) {
    r.one_worker_passes_per_s = std::max(r.one_worker_passes_per_s, passes_per_second(1, shapes, seconds));
    r.all_workers_passes_per_s = std::max(r.all_workers_passes_per_s, passes_per_second(workers, shapes, seconds));
  }
  return r;
}

}  // namespace dpv::course
