// The machine's reference speed-up for K independent GEMM workers (see machine_reference.h).
#include "cli/machine_reference.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "engine/error.h"
#include "engine/model.h"

namespace dpv::cli {
namespace {

using Clock = std::chrono::steady_clock;

// `workers` threads, each with its own operands, run passes until `seconds` are up; every worker
// starts at the same time (a spinning start line) and the passes all of them finished are counted.
double passes_per_second(int workers, const std::vector<GemmShape>& shapes, double seconds) {
  std::vector<std::unique_ptr<GemmReference>> refs;
  for (int w = 0; w < workers; ++w)
    refs.push_back(std::make_unique<GemmReference>(shapes, /*float64=*/false, GemmLibrary::EngineCpu));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<int64_t> passes(static_cast<size_t>(workers), 0);
  std::vector<double> spent(static_cast<size_t>(workers), 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      GemmReference& ref = *refs[static_cast<size_t>(w)];
      ref.time_one_pass();  // warm: operands in cache, the library's first-call set-up done
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      const auto t0 = Clock::now();
      double elapsed = 0;
      int64_t n = 0;
      while (elapsed < seconds) {
        ref.time_one_pass();
        ++n;
        elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
      }
      passes[static_cast<size_t>(w)] = n;
      spent[static_cast<size_t>(w)] = elapsed;
    });
  while (ready.load() < workers) std::this_thread::yield();
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  double rate = 0;
  for (int w = 0; w < workers; ++w)
    if (spent[static_cast<size_t>(w)] > 0) rate += static_cast<double>(passes[static_cast<size_t>(w)]) / spent[static_cast<size_t>(w)];
  return rate;
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

}  // namespace dpv::cli
