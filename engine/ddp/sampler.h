#pragma once
// torch.utils.data.distributed.DistributedSampler (PyTorch 1.13): which samples each rank sees.
//   num_samples = ceil(N / world)  (drop_last and N % world != 0: ceil((N - world) / world) = floor(N / world))
//   total       = num_samples * world
//   indices     = range(N), or torch.randperm(N, generator=manual_seed(seed + epoch)) when shuffling;
//                 padded by repeating from the start up to total (or truncated with drop_last);
//   rank r      = indices[r : total : world]   (strided, not contiguous chunks)
// N=10, world=4: [0,4,8] [1,5,9] [2,6,0] [3,7,1].
#include <cstdint>
#include <vector>

namespace dpv {

struct SamplerOptions {
  bool shuffle = true;     // DistributedSampler's default
  uint64_t seed = 0;
  int64_t epoch = 0;       // set_epoch(epoch): the permutation is seeded with seed + epoch
  bool drop_last = false;
};

// torch.randperm(n, generator=g) on the CPU after g.manual_seed(seed): PyTorch's mt19937 and its
// swap loop (r[i] <-> r[i + random() % (n - i)]), exactly.
std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed);

int64_t sampler_num_samples(int64_t dataset_size, int world_size, bool drop_last);

// The indices rank `rank` of `world_size` iterates over for one epoch. Throws dpv::Error with
// PyTorch's ValueError text for an invalid rank.
std::vector<int64_t> distributed_sampler_indices(int64_t dataset_size, int world_size, int rank,
                                                 const SamplerOptions& options);

// Per index of distributed_sampler_indices(...): true where it is padding, a repeat of an earlier
// sample added so that every rank gets num_samples (position r + k*world of the padded list >= N).
std::vector<bool> distributed_sampler_padding(int64_t dataset_size, int world_size, int rank,
                                              const SamplerOptions& options);

}  // namespace dpv
