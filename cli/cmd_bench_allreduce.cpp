// `dpv bench allreduce`, run under `dpv launch`: all-reduce (sum, float32) time and bandwidth from
// --min-bytes to --max-bytes over this job's process group (Gloo's ring on CPU ranks, NCCL on GPU
// ranks), as nccl-tests and bench/allreduce_vs_pytorch.py measure them: per size, the mean time of
// --iters calls after a barrier, the slowest rank's time counting; algbw = bytes / time,
// busbw = algbw * 2(world-1)/world. Rank 0 prints the table and writes --json. A benchmark: figures, no verdict.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/ddp_launched.h"
#include "cli/int_options.h"
#include "cli/output_paths.h"
#include "cli/size_checks.h"
#include "cli/validators.h"
#include "engine/backend_registry.h"
#include "engine/device.h"
#include "engine/process_groups/multiprocess/init_process_group.h"
#include "engine/error.h"
#include "engine/io/atomic_file.h"

namespace dpv::cli {
namespace {

struct AllreduceBenchOptions {
  double min_bytes = 4096, max_bytes = 64.0 * 1024 * 1024;
  int factor = 4;           // sizes grow by this factor
  int iters = 20, warmup = 3;
  double max_seconds_per_size = 2.0;  // fewer iterations for the large sizes on slow links
  std::string json;
};

struct SizeResult {
  size_t bytes = 0;
  int iters = 0;
  double seconds = 0, algbw = 0, busbw = 0;
};

double max_over_ranks(ProcessGroup& g, double value) {
  Tensor in = Tensor::from_doubles({1}, DType::Float64, {value});
  Tensor all = Tensor::zeros({g.size()}, DType::Float64);
  g.all_gather(in, all);
  std::vector<double> v = all.to_doubles();
  return *std::max_element(v.begin(), v.end());
}

void run_allreduce_bench(const AllreduceBenchOptions& o) {
  // Before joining the job: the largest message must fit in memory, the sizes must make a range,
  // and the JSON output must be writable.
  check(o.min_bytes <= o.max_bytes, "--min-bytes " + std::to_string(static_cast<int64_t>(o.min_bytes)) +
                                        " is larger than --max-bytes", ErrorClass::ValueError);
  check_bytes(o.max_bytes < 9.2e18 ? std::optional<int64_t>(static_cast<int64_t>(o.max_bytes)) : std::nullopt,
              "--max-bytes", "the largest message");
  if (!o.json.empty()) check_output_path(o.json, "--json");
  const dist::EnvLookup lookup = dist::environment_lookup();
  const dist::RankEnv env = read_launched_rank_env(lookup);  // says how to start it when not launched
  std::unique_ptr<dist::DistSession> session = dist::init_process_group(env, dist::read_dist_options(lookup));
  ProcessGroup& g = session->group();
  const int world = g.size();
  const bool rank0 = g.rank() == 0;
  std::shared_ptr<Device> device;  // null: host memory (Gloo); the rank's GPU with nccl
  if (session->options().backend == dist::ProcessGroupBackend::Nccl)
    device = DeviceSet::create("cuda:" + std::to_string(session->env().local_rank))->shared(0);

  if (rank0) {
    std::printf("all_reduce (sum, float32) over %s, %d ranks; time = mean of up to %d calls, slowest rank\n",
                g.backend().c_str(), world, o.iters);
    std::printf("%12s %8s %12s %12s %12s\n", "bytes", "iters", "time (us)", "algbw GB/s", "busbw GB/s");
    std::fflush(stdout);  // the header reaches a pipe or file at once: the group is formed
  }
  std::vector<SizeResult> results;
  for (double b = o.min_bytes; b <= o.max_bytes; b *= o.factor) {
    const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(b) / 4);
    Tensor host = Tensor::full({n}, DType::Float32, g.rank() + 1.0);
    Tensor buf = device ? host.to(device) : host;
    // One checked call: every element must be 1 + 2 + ... + world.
    g.all_reduce_sum(buf);
    const double want = world * (world + 1) / 2.0;
    std::vector<double> first = buf.to_doubles(1);
    check(first[0] == want, "all_reduce gave " + std::to_string(first[0]) + " instead of " + std::to_string(want));
    for (int i = 0; i < o.warmup; ++i) g.all_reduce_sum(buf);
    // Time one call to pick an iteration count every rank agrees on.
    g.barrier();
    auto t0 = std::chrono::steady_clock::now();
    g.all_reduce_sum(buf);
    double one = max_over_ranks(g, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    int iters = std::clamp(static_cast<int>(o.max_seconds_per_size / std::max(one, 1e-9)), 1, o.iters);
    g.barrier();
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) g.all_reduce_sum(buf);
    double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    SizeResult r;
    r.bytes = static_cast<size_t>(n) * 4;
    r.iters = iters;
    r.seconds = max_over_ranks(g, mine);
    r.algbw = r.bytes / r.seconds / 1e9;
    r.busbw = r.algbw * 2.0 * (world - 1) / world;
    results.push_back(r);
    if (rank0) {
      std::printf("%12zu %8d %12.1f %12.3f %12.3f\n", r.bytes, r.iters, r.seconds * 1e6, r.algbw, r.busbw);
      std::fflush(stdout);
    }
  }
  if (rank0 && !o.json.empty()) {
    nlohmann::ordered_json j{{"op", "all_reduce"}, {"backend", g.backend()}, {"ranks", world}, {"dtype", "float32"}};
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const SizeResult& r : results) {
      rows.push_back({{"bytes", r.bytes}, {"iters", r.iters}, {"seconds", r.seconds}, {"algbw_GBps", r.algbw},
                      {"busbw_GBps", r.busbw}});
    }
    j["results"] = rows;
    write_file_atomic(o.json, j.dump(2) + "\n");
  }
  session->shutdown();
}

}  // namespace

void add_bench_allreduce_command(CLI::App& app, Action& run) {
  CLI::App* bench = app.get_subcommand("bench");
  auto o = std::make_shared<AllreduceBenchOptions>();
  auto* sub = bench->add_subcommand(
      "allreduce", "All-reduce busbw over the launched ranks: dpv launch --nproc-per-node W -- bench allreduce");
  sub->add_option("--min-bytes", o->min_bytes, "Smallest message")->capture_default_str()->check(number_in(4, kMaxBenchBytes));
  sub->add_option("--max-bytes", o->max_bytes, "Largest message")->capture_default_str()->check(number_in(4, kMaxBenchBytes));
  sub->add_option("--factor", o->factor, "Each size is this many times the previous")->capture_default_str()->transform(integer_in<int>(2));
  sub->add_option("--iters", o->iters, "Timed calls per size (at most)")->capture_default_str()->transform(integer_in<int>(1));
  sub->add_option("--warmup", o->warmup, "Untimed calls per size first")->capture_default_str()->transform(integer_in<int>(0));
  sub->add_option("--seconds-per-size", o->max_seconds_per_size, "Fewer timed calls for a size that would take longer")
      ->capture_default_str()
      ->check(seconds_in(kBenchSecondsPerSize));
  sub->add_option("--json", o->json, "Rank 0 writes the figures as JSON");
  sub->callback([o, &run] { run = [o] { run_allreduce_bench(*o); }; });
}

}  // namespace dpv::cli
