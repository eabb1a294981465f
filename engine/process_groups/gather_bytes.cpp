#include "engine/process_groups/gather_bytes.h"

#include <algorithm>
#include <cstring>

#include "engine/device.h"
#include "engine/error.h"

namespace dpv {
namespace {

Tensor on(const Tensor& host, const std::shared_ptr<Device>& device) { return device ? host.to(device) : host; }

// The sizes every rank announced, checked before the padded buffers are allocated from the largest.
void check_announced_sizes(const std::vector<int64_t>& sizes) {
  for (size_t r = 0; r < sizes.size(); ++r) {
    if (sizes[r] >= 0 && sizes[r] <= kMaxGatheredBytesPerRank) continue;
    throw Error("rank " + std::to_string(r) + " announced " + std::to_string(sizes[r]) +
                " bytes to gather, outside 0 to " + std::to_string(kMaxGatheredBytesPerRank) +
                " bytes per rank (does every rank run the same dpv build?)");
  }
}

}  // namespace

std::vector<std::string> all_gather_bytes(ProcessGroup& group, const std::string& bytes,
                                          const std::shared_ptr<Device>& device) {
  const int world = group.size();
  Tensor size = on(Tensor::from_int64({1}, {static_cast<int64_t>(bytes.size())}), device);
  Tensor sizes = on(Tensor::zeros({world}, DType::Int64), device);
  group.all_gather(size, sizes);
  const std::vector<int64_t> n = sizes.to_int64();  // [world]
  check_announced_sizes(n);
  const int64_t longest = *std::max_element(n.begin(), n.end());
  const int64_t words = std::max<int64_t>(1, (longest + 7) / 8);  // int64 words: a dtype every backend moves

  Tensor mine = Tensor::zeros({words}, DType::Int64);  // [words]: this rank's bytes, zero padded
  std::memcpy(mine.raw(), bytes.data(), bytes.size());
  Tensor all = on(Tensor::zeros({words * world}, DType::Int64), device);  // [world * words]
  Tensor mine_on_device = on(mine, device);
  group.all_gather(mine_on_device, all);
  const Tensor host = device ? all.to(nullptr) : all;

  std::vector<std::string> out(static_cast<size_t>(world));
  const char* base = static_cast<const char*>(host.raw());
  for (int r = 0; r < world; ++r) out[r].assign(base + static_cast<size_t>(r) * words * 8, static_cast<size_t>(n[r]));
  return out;
}

}  // namespace dpv
