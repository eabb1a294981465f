// DistributedSampler and the CPU torch.randperm it shuffles with.
#include "engine/ddp/sampler.h"

#include <random>

#include "engine/error.h"

namespace dpv {

std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed) {
  check(n >= 0, "n must be non-negative, got" + std::to_string(n));
  // at::mt19937 seeds its state with the low 32 bits exactly as std::mt19937 does, and
  // CPUGeneratorImpl::random() returns one 32-bit draw: the same stream.
  std::mt19937 engine(static_cast<uint32_t>(seed & 0xffffffffu));
  std::vector<int64_t> r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r[static_cast<size_t>(i)] = i;
  for (int64_t i = 0; i + 1 < n; ++i) {
    const int64_t z = static_cast<int64_t>(static_cast<uint64_t>(engine()) % static_cast<uint64_t>(n - i));
    std::swap(r[static_cast<size_t>(i)], r[static_cast<size_t>(z + i)]);
  }
  return r;
}

int64_t sampler_num_samples(int64_t n, int world_size, bool drop_last) {
  check(world_size >= 1, "world_size must be at least 1, got " + std::to_string(world_size), ErrorClass::ValueError);
  if (drop_last && n % world_size != 0) return (n - world_size + world_size - 1) / world_size;  // ceil((N-world)/world)
  return (n + world_size - 1) / world_size;
}

std::vector<int64_t> distributed_sampler_indices(int64_t n, int world_size, int rank, const SamplerOptions& o) {
  if (rank >= world_size || rank < 0)
    throw Error("Invalid rank " + std::to_string(rank) + ", rank should be in the interval [0, " +
                    std::to_string(world_size - 1) + "]",
                ErrorClass::ValueError);
  const int64_t num_samples = sampler_num_samples(n, world_size, o.drop_last);
  const int64_t total = num_samples * world_size;
  std::vector<int64_t> indices;
  if (o.shuffle) {
    indices = torch_randperm(n, o.seed + static_cast<uint64_t>(o.epoch));
  } else {
    for (int64_t i = 0; i < n; ++i) indices.push_back(i);
  }
  if (!o.drop_last) {
    // indices += indices[:padding] (repeated when the padding is longer than the data set).
    check(n > 0 || total == 0, "DistributedSampler: the data set is empty");
    const int64_t pad = total - n;
    for (int64_t i = 0; i < pad; ++i) indices.push_back(indices[static_cast<size_t>(i % n)]);
  } else {
    indices.resize(static_cast<size_t>(total));
  }
  std::vector<int64_t> mine;
  for (int64_t i = rank; i < total; i += world_size) mine.push_back(indices[static_cast<size_t>(i)]);
  return mine;
}

std::vector<bool> distributed_sampler_padding(int64_t n, int world_size, int rank, const SamplerOptions& o) {
  const auto mine = distributed_sampler_indices(n, world_size, rank, o);  // validates rank and sizes
  std::vector<bool> padded;
  for (size_t k = 0; k < mine.size(); ++k)
    padded.push_back(!o.drop_last && static_cast<int64_t>(rank) + static_cast<int64_t>(k) * world_size >= n);
  return padded;
}

}  // namespace dpv
