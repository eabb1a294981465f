// `dpv bench allreduce`, run under `dpv launch`: all-reduce (sum, float32) time and bandwidth from
// --min-bytes to --max-bytes over this job's process group (Gloo's ring on CPU ranks, NCCL on GPU
// ranks), as nccl-tests and bench/allreduce_vs_pytorch.py measure them: per size, the mean time of
// --iters calls after a barrier, the slowest rank's time counting; algbw = bytes / time,
// busbw = algbw * 2(world-1)/world (engine/process_groups/allreduce_bench.h measures it). Rank 0
// prints the table and writes --json. A benchmark: figures, no verdict.
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
#include "engine/process_groups/allreduce_bench.h"
#include "engine/process_groups/multiprocess/init_process_group.h"
#include "engine/error.h"
#include "engine/io/atomic_file.h"

namespace dpv::cli {
namespace {

struct AllreduceBenchOptions {
  AllreduceBenchPlan plan;
  std::string json;
};

void run_allreduce_bench(const AllreduceBenchOptions& o) {
  // Before joining the job: the largest message must fit in memory, the sizes must make a range,
  // and the JSON output must be writable.
  check(o.plan.min_bytes <= o.plan.max_bytes,
        "--min-bytes " + std::to_string(static_cast<int64_t>(o.plan.min_bytes)) + " is larger than --max-bytes",
        ErrorClass::ValueError);
  check_bytes(o.plan.max_bytes < 9.2e18 ? std::optional<int64_t>(static_cast<int64_t>(o.plan.max_bytes)) : std::nullopt,
              "--max-bytes", "the largest message");
  if (!o.json.empty()) check_output_path(o.json, "--json");
  const dist::EnvLookup lookup = dist::environment_lookup();
  const dist::RankEnv env = read_launched_rank_env(lookup);  // says how to start it when not launched
  std::unique_ptr<dist::DistSession> session = dist::init_process_group(env, dist::read_dist_options(lookup));
  ProcessGroup& g = session->group();
  const int world = g.size();
  const bool rank0 = g.rank() == 0;
  // Where the group's tensors live, the per-rank times included: null (host memory) for Gloo,
  // the session's GPU for NCCL, which rejects host memory as PyTorch's NCCL group does. The
  // session owns the GPU, so the NCCL group is destroyed before it, even on an error.
  const std::shared_ptr<Device> device = session->device();

  if (rank0) {
    std::printf("all_reduce (sum, float32) over %s, %d ranks; time = mean of up to %d calls, slowest rank\n",
                g.backend().c_str(), world, o.plan.iters);
    std::printf("%12s %8s %12s %12s %12s\n", "bytes", "iters", "time (us)", "algbw GB/s", "busbw GB/s");
    std::fflush(stdout);  // the header reaches a pipe or file at once: the group is formed
  }
  const std::vector<AllreduceSizeResult> results =
      measure_allreduce(g, device, o.plan, [rank0](const AllreduceSizeResult& r) {
        if (!rank0) return;
        std::printf("%12zu %8d %12.1f %12.3f %12.3f\n", r.bytes, r.iters, r.seconds * 1e6, r.algbw, r.busbw);
        std::fflush(stdout);
      });
  if (rank0 && !o.json.empty()) {
    nlohmann::ordered_json j{{"op", "all_reduce"}, {"backend", g.backend()}, {"ranks", world}, {"dtype", "float32"}};
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const AllreduceSizeResult& r : results) {
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
  sub->add_option("--min-bytes", o->plan.min_bytes, "Smallest message")->capture_default_str()->check(number_in(4, kMaxBenchBytes));
  sub->add_option("--max-bytes", o->plan.max_bytes, "Largest message")->capture_default_str()->check(number_in(4, kMaxBenchBytes));
  sub->add_option("--factor", o->plan.factor, "Each size is this many times the previous")->capture_default_str()->transform(integer_in<int>(2));
  sub->add_option("--iters", o->plan.iters, "Timed calls per size (at most)")->capture_default_str()->transform(integer_in<int>(1));
  sub->add_option("--warmup", o->plan.warmup, "Untimed calls per size first")->capture_default_str()->transform(integer_in<int>(0));
  sub->add_option("--seconds-per-size", o->plan.max_seconds_per_size, "Fewer timed calls for a size that would take longer")
      ->capture_default_str()
      ->check(seconds_in(kBenchSecondsPerSize));
  sub->add_option("--json", o->json, "Rank 0 writes the figures as JSON");
  sub->callback([o, &run] { run = [o] { run_allreduce_bench(*o); }; });
}

}  // namespace dpv::cli
