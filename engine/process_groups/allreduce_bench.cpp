#include "engine/process_groups/allreduce_bench.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "engine/device.h"
#include "engine/error.h"

namespace dpv {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Tensor on(const Tensor& host, const std::shared_ptr<Device>& device) { return device ? host.to(device) : host; }

AllreduceSizeResult measure_size(ProcessGroup& g, const std::shared_ptr<Device>& device, double bytes,
                                 const AllreduceBenchPlan& plan) {
  const int world = g.size();
  const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(bytes) / 4);
  Tensor buf = on(Tensor::full({n}, DType::Float32, g.rank() + 1.0), device);  // [n]
  // One checked call: every element must be 1 + 2 + ... + world.
  g.all_reduce_sum(buf);
  const double want = world * (world + 1) / 2.0;
  const std::vector<double> first = buf.to_doubles(1);
  check(first[0] == want, "all_reduce gave " + std::to_string(first[0]) + " instead of " + std::to_string(want));
  for (int i = 0; i < plan.warmup; ++i) g.all_reduce_sum(buf);
  // Time one call to pick an iteration count every rank agrees on.
  g.barrier();
  auto t0 = Clock::now();
  g.all_reduce_sum(buf);
  const double one = max_over_ranks(g, seconds_since(t0), device);
  const int iters = std::clamp(static_cast<int>(plan.max_seconds_per_size / std::max(one, 1e-9)), 1, plan.iters);
  g.barrier();
  t0 = Clock::now();
  for (int i = 0; i < iters; ++i) g.all_reduce_sum(buf);
  const double mine = seconds_since(t0) / iters;
  AllreduceSizeResult r;
  r.bytes = static_cast<size_t>(n) * 4;
  r.iters = iters;
  r.seconds = max_over_ranks(g, mine, device);
  r.algbw = static_cast<double>(r.bytes) / r.seconds / 1e9;
  r.busbw = r.algbw * 2.0 * (world - 1) / world;
  return r;
}

}  // namespace

double max_over_ranks(ProcessGroup& group, double value, const std::shared_ptr<Device>& device) {
  Tensor in = on(Tensor::from_doubles({1}, DType::Float64, {value}), device);  // [1]
  Tensor all = on(Tensor::zeros({group.size()}, DType::Float64), device);     // [world]
  group.all_gather(in, all);
  const std::vector<double> v = all.to_doubles();
  return *std::max_element(v.begin(), v.end());
}

std::vector<AllreduceSizeResult> measure_allreduce(ProcessGroup& group, const std::shared_ptr<Device>& device,
                                                   const AllreduceBenchPlan& plan,
                                                   const std::function<void(const AllreduceSizeResult&)>& on_size) {
  std::vector<AllreduceSizeResult> results;
  for (double b = plan.min_bytes; b <= plan.max_bytes; b *= plan.factor) {
    results.push_back(measure_size(group, device, b, plan));
    if (on_size) on_size(results.back());
  }
  return results;
}

}  // namespace dpv
