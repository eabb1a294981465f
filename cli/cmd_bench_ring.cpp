// `dpv bench ring`: the in-process ring all-reduce that DDP's in-process ranks use (float32 sum,
// world threads, engine/process_groups/in_process_group.h) against a plain memcpy of the same bytes on this
// machine. busbw = algbw * 2(world-1)/world (nccl-tests), so a ring as fast as the memory would reach
// about the memcpy rate (each step copies or adds n/world bytes per rank). A benchmark: figures only.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/int_options.h"
#include "cli/output_paths.h"
#include "cli/size_checks.h"
#include "cli/validators.h"
#include "engine/process_groups/in_process_group.h"
#include "engine/error.h"
#include "engine/io/atomic_file.h"

namespace dpv::cli {
namespace {

struct RingBenchOptions {
  std::vector<int> ranks{2, 4};
  double min_bytes = 64.0 * 1024, max_bytes = 64.0 * 1024 * 1024;
  int iters = 10;
  std::string json;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The first rank's own error, not a collective woken by another rank's abort.
void rethrow_first_cause(const std::vector<std::exception_ptr>& errors) {
  std::exception_ptr first;
  for (const auto& e : errors) {
    if (!e) continue;
    if (!first) first = e;
    try {
      std::rethrow_exception(e);
    } catch (const Error& error) {
      if (error.reason() != ErrorReason::GroupAborted) throw;
    } catch (...) {
      throw;
    }
  }
  if (first) std::rethrow_exception(first);
}

// Best-of-iters GB/s of memcpy over `bytes`.
double memcpy_gbps(size_t bytes, int iters) {
  std::vector<char> a(bytes, 1), b(bytes, 0);
  double best = 1e30;
  for (int i = 0; i < iters + 1; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    const double s = seconds_since(t0);
    if (i > 0) best = std::min(best, s);  // the first pass faults the pages in
  }
  return static_cast<double>(bytes) / best / 1e9;
}

// Mean seconds of one all-reduce over world threads (the slowest rank's time of each call counting).
// A rank's failure (std::bad_alloc for its buffer, say) must not escape its thread, where it would
// abort the process: it wakes the other ranks (abort) and is rethrown here as the engine's error.
double ring_seconds(int world, size_t bytes, int iters) {
  auto group = make_in_process_group(world);
  const int64_t n = static_cast<int64_t>(bytes / 4);
  std::vector<double> per_rank(static_cast<size_t>(world), 0);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      ProcessGroup& g = *group[static_cast<size_t>(r)];
      try {
        Tensor t = Tensor::full({n}, DType::Float32, 1.0);  // [n]
        g.all_reduce_sum(t);  // warm-up: pages faulted in
        g.barrier();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) g.all_reduce_sum(t);
        per_rank[static_cast<size_t>(r)] = seconds_since(t0) / iters;
      } catch (const std::bad_alloc&) {
        errors[static_cast<size_t>(r)] = std::make_exception_ptr(
            Error("out of memory: rank " + std::to_string(r) + " could not allocate its " + std::to_string(bytes) +
                      "-byte buffer; use a smaller --max-bytes or fewer --ranks",
                  ErrorClass::OutOfMemoryError, ErrorReason::OutOfMemory));
        abort_in_process_group(g, "rank " + std::to_string(r) + " ran out of memory");
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
        abort_in_process_group(g, "rank " + std::to_string(r) + " failed");
      }
    });
  for (auto& t : threads) t.join();
  rethrow_first_cause(errors);
  return *std::max_element(per_rank.begin(), per_rank.end());
}

void run_ring_bench(const RingBenchOptions& o) {
  if (!o.json.empty()) check_output_path(o.json, "--json");
  for (int world : o.ranks) check(world >= 1 && world <= 64, "--ranks: each world size must be 1 to 64, got " + std::to_string(world), ErrorClass::ValueError);
  check(o.min_bytes <= o.max_bytes, "--min-bytes " + std::to_string(static_cast<int64_t>(o.min_bytes)) +
                                        " is larger than --max-bytes", ErrorClass::ValueError);
  // Before any allocation: the largest message on every rank of the largest world, plus memcpy's
  // two copies of it, must fit in this machine's memory.
  const int largest_world = o.ranks.empty() ? 0 : *std::max_element(o.ranks.begin(), o.ranks.end());
  const double largest_use = o.max_bytes * (largest_world + 2);
  check_bytes(largest_use < 9.2e18 ? std::optional<int64_t>(static_cast<int64_t>(largest_use)) : std::nullopt,
              "--max-bytes", "the largest message on each of " + std::to_string(largest_world) +
                                 " ranks and memcpy's two copies");
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::printf("%6s %12s %12s %12s %12s %14s %10s\n", "ranks", "bytes", "time (us)", "algbw GB/s", "busbw GB/s",
              "memcpy GB/s", "busbw/cpy");
  for (int world : o.ranks) {
    for (double b = o.min_bytes; b <= o.max_bytes; b *= 4) {
      const size_t bytes = static_cast<size_t>(b) / 4 * 4;
      const double s = ring_seconds(world, bytes, o.iters);
      const double algbw = static_cast<double>(bytes) / s / 1e9, busbw = algbw * 2.0 * (world - 1) / world;
      const double copy = memcpy_gbps(bytes, o.iters);
      std::printf("%6d %12zu %12.1f %12.3f %12.3f %14.3f %9.2fx\n", world, bytes, s * 1e6, algbw, busbw, copy,
                  busbw / copy);
      std::fflush(stdout);
      rows.push_back({{"ranks", world}, {"bytes", bytes}, {"seconds", s}, {"algbw_GBps", algbw}, {"busbw_GBps", busbw},
                      {"memcpy_GBps", copy}});
    }
  }
  if (!o.json.empty()) {
    nlohmann::ordered_json j{{"op", "all_reduce"}, {"backend", "in-process ring"}, {"dtype", "float32"}};
    j["results"] = rows;
    write_file_atomic(o.json, j.dump(2) + "\n");
  }
}

}  // namespace

void add_bench_ring_command(CLI::App& app, Action& run) {
  CLI::App* bench = app.get_subcommand("bench");
  auto o = std::make_shared<RingBenchOptions>();
  auto* sub = bench->add_subcommand("ring", "The in-process ring all-reduce (DDP's in-process ranks) against memcpy");
  sub->add_option("--ranks", o->ranks, "World sizes")->capture_default_str();
  sub->add_option("--min-bytes", o->min_bytes, "Smallest message")->capture_default_str()->check(number_in(4, kMaxBenchBytes));
  sub->add_option("--max-bytes", o->max_bytes, "Largest message")->capture_default_str()->check(number_in(4, kMaxBenchBytes));
  sub->add_option("--iters", o->iters, "Timed calls per size")->capture_default_str()->transform(integer_in<int>(1));
  sub->add_option("--json", o->json, "Write the figures as JSON");
  sub->callback([o, &run] { run = [o] { run_ring_bench(*o); }; });
}

}  // namespace dpv::cli
