#include "engine/process_groups/gather_bytes.h"

#include <algorithm>
#include <cstring>

#include "engine/device.h"

namespace dpv {
namespace {

Tensor on(const Tensor& host, const std::shared_ptr<Device>& device) { return device ? host.to(device) : host; }

}  // namespace

std::vector<std::string> all_gather_bytes(ProcessGroup& group, const std::string& bytes,
                                          const std::shared_ptr<Device>& device) {
  const int world = group.size();
  Tensor size = on(Tensor::from_int64({1}, {static_cast<int64_t>(bytes.size())}), device);
  Tensor sizes = on(Tensor::zeros({world}, DType::Int64), device);
  group.all_gather(size, sizes);
  const std::vector<int64_t> n = sizes.to_int64();
  const int64_t longest = *std::max_element(n.begin(), n.end());
  const int64_t words = std::max<int64_t>(1, (longest + 7) / 8);  // int64 words: a dtype every backend moves

  Tensor mine = Tensor::zeros({words}, DType::Int64);
  std::memcpy(mine.raw(), bytes.data(), bytes.size());
  Tensor all = on(Tensor::zeros({words * world}, DType::Int64), device);
  Tensor mine_on_device = on(mine, device);
  group.all_gather(mine_on_device, all);
  const Tensor host = device ? all.to(nullptr) : all;

  std::vector<std::string> out(static_cast<size_t>(world));
  const char* base = static_cast<const char*>(host.raw());
  for (int r = 0; r < world; ++r) out[r].assign(base + static_cast<size_t>(r) * words * 8, static_cast<size_t>(n[r]));
  return out;
}

}  // namespace dpv
