// Collectives on the devices of a spec (default cuda:0x4: four virtual devices on GPU 0) for a
// gradient-sized buffer (default 64 MiB of float32), against the plain device-to-device copy
// bandwidth of the same GPU measured through the engine. Prints a table and, with a second
// argument, writes JSON. Usage: gpu_collectives [SPEC] [JSON] [MIB]
// A benchmark: it prints figures, it checks nothing.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/collectives.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/io/atomic_file.h"

using namespace dpv;

namespace {

double best_of(int reps, const std::function<double()>& once) {
  double best = 1e300;
  for (int i = 0; i < reps; ++i) best = std::min(best, once());
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string spec = argc > 1 ? argv[1] : "cuda:0x4";
  const std::string json_path = argc > 2 ? argv[2] : "";
  const int64_t mib = argc > 3 ? std::atoll(argv[3]) : 64;
  try {
    if (spec.rfind("cuda", 0) == 0 && !cuda_available()) {
      std::printf("no CUDA GPU here (%s); nothing to measure\n", cuda_build_info().c_str());
      return 0;
    }
    auto devices = DeviceSet::create(spec);
    const int k = devices->size();
    auto coll = make_collectives(devices);
    const int64_t n = mib * 1024 * 1024 / 4;
    std::vector<Tensor> bufs, gathered;
    for (int i = 0; i < k; ++i) bufs.push_back(Tensor::full({n}, DType::Float32, 1.0, devices->shared(i)));

    // The yardstick: one device-to-device copy of the same size on the first device's GPU (bytes
    // read + written count once each way, as the nccl-tests "size" does: algbw = size / time).
    // It is a broadcast between two virtual devices of that GPU, which the collectives time with
    // CUDA events around a single cudaMemcpyAsync: no host gap inside the timing, as PyTorch's
    // torch.cuda.Event timing of a.copy_(b) in gpu_vs_pytorch.py.
    const Device& first = (*devices)[0];
    const std::string copy_spec =
        first.kind() == DeviceKind::Cuda ? "cuda:" + std::to_string(first.physical()) + "x2" : "cpu:2";
    auto copy_devices = DeviceSet::create(copy_spec);
    auto copy_coll = make_collectives(copy_devices);
    std::vector<Tensor> pair{Tensor::zeros({n}, DType::Float32, copy_devices->shared(0)),
                             Tensor::zeros({n}, DType::Float32, copy_devices->shared(1))};
    copy_coll->broadcast(pair, 0);  // warm-up
    const double copy_s = best_of(10, [&] { return copy_coll->broadcast(pair, 0).seconds; });
    const double bytes = static_cast<double>(n) * 4;
    std::printf("devices %s (%d ranks, transport: %s), buffer %lld MiB float32\n", spec.c_str(), k,
                coll->transport().c_str(), static_cast<long long>(mib));
    std::printf("device copy on %s: %.3f ms = %.1f GB/s\n", (*devices)[0].name().c_str(), 1e3 * copy_s,
                bytes / copy_s / 1e9);
    std::printf("%-11s %10s %10s %10s %14s\n", "op", "ms", "algbw", "busbw", "busbw/copy");

    std::string json = "{\"spec\": \"" + spec + "\", \"ranks\": " + std::to_string(k) + ", \"transport\": \"" +
                       coll->transport() + "\", \"mib\": " + std::to_string(mib) +
                       ", \"copy_gbps\": " + std::to_string(bytes / copy_s / 1e9) + ", \"ops\": [";
    auto report = [&](const CollectiveReport& r, bool first) {
      std::printf("%-11s %10.3f %10.1f %10.1f %13.0f%%\n", dpv::collective_op_name(r.op), 1e3 * r.seconds, r.algbw, r.busbw,
                  100.0 * r.busbw / (bytes / copy_s / 1e9));
      json += std::string(first ? "" : ", ") + "{\"op\": \"" + dpv::collective_op_name(r.op) + "\", \"ms\": " + std::to_string(1e3 * r.seconds) +
              ", \"algbw\": " + std::to_string(r.algbw) + ", \"busbw\": " + std::to_string(r.busbw) + "}";
    };
    auto best = [&](const std::function<CollectiveReport()>& once) {
      CollectiveReport keep = once();  // warm-up (NCCL communicators, pool growth)
      keep.seconds = 1e300;
      for (int i = 0; i < 10; ++i) {
        CollectiveReport r = once();
        if (r.seconds < keep.seconds) keep = r;
      }
      return keep;
    };
    report(best([&] { return coll->broadcast(bufs, 0); }), true);
    report(best([&] { return coll->reduce_add(bufs, 0); }), false);
    report(best([&] { return coll->all_reduce(bufs); }), false);
    std::vector<Tensor> pieces;
    for (int i = 0; i < k; ++i) {
      pieces.push_back(bufs[static_cast<size_t>(i)].slice0(0, n / k));
      gathered.push_back(Tensor::zeros({(n / k) * k}, DType::Float32, devices->shared(i)));
    }
    report(best([&] { return coll->all_gather(pieces, gathered); }), false);
    json += "]}\n";
    if (!json_path.empty()) write_file_atomic(json_path, json);
  } catch (const Error& e) {
    std::fprintf(stderr, "gpu_collectives: %s\n", e.full().c_str());
    return 1;
  }
  return 0;
}
