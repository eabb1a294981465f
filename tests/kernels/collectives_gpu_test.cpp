// CUDA collectives: peer copies on virtual devices of one GPU (exact left-fold sums, bit for bit
// equal to the host-thread reference), NCCL across distinct GPUs (where there are two or more),
// and the reports (bytes, seconds, bandwidths).
#include <gtest/gtest.h>

#include "engine/backend_registry.h"
#include "engine/collectives.h"
#include "engine/error.h"
#include "tests/kernels/kernel_test_util.h"

namespace dpv::test {
namespace {

std::vector<Tensor> random_bufs(const DeviceSet& set, int ranks, int64_t n, DType dt, std::mt19937_64& rng) {
  std::vector<Tensor> bufs;
  for (int i = 0; i < ranks; ++i) bufs.push_back(random_host({n}, dt, rng).to(set.shared(i)));
  return bufs;
}

std::vector<Tensor> host_copies(const std::vector<Tensor>& bufs) {
  std::vector<Tensor> out;
  for (const Tensor& b : bufs) out.push_back(b.to(nullptr));
  return out;
}

// The reference: the same collective through the host-thread implementation on cpu:K.
void check_against_host(const std::string& spec, DType dt, double rtol) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + spec + ", " + dtype_label(dt));
  std::mt19937_64 rng(seed);
  auto gpus = DeviceSet::create(spec);
  const int k = gpus->size();
  auto cpus = DeviceSet::create("cpu:" + std::to_string(k));
  auto gpu_coll = make_collectives(gpus);
  auto cpu_coll = make_collectives(cpus);
  const int64_t n = 100003;

  auto to_cpu_set = [&](const std::vector<Tensor>& bufs) {
    std::vector<Tensor> out;
    for (size_t i = 0; i < bufs.size(); ++i) out.push_back(bufs[i].to(cpus->shared(static_cast<int>(i))));
    return out;
  };

  {  // broadcast from the last rank
    auto g = random_bufs(*gpus, k, n, dt, rng);
    auto c = to_cpu_set(g);
    const CollectiveReport r = gpu_coll->broadcast(g, k - 1);
    cpu_coll->broadcast(c, k - 1);
    for (int i = 0; i < k; ++i) EXPECT_TRUE(close(g[i], c[i], 0)) << "broadcast, rank " << i;
    EXPECT_EQ(r.op, CollectiveOp::Broadcast);
    EXPECT_EQ(r.bytes, static_cast<size_t>(n) * dtype_size(dt));
    EXPECT_GT(r.seconds, 0);
    EXPECT_GT(r.algbw, 0);
  }
  {  // reduce_add onto rank 0: other ranks unchanged
    auto g = random_bufs(*gpus, k, n, dt, rng);
    auto before = host_copies(g);
    auto c = to_cpu_set(g);
    gpu_coll->reduce_add(g, 0);
    cpu_coll->reduce_add(c, 0);
    EXPECT_TRUE(close(g[0], c[0], rtol)) << "reduce_add root";
    for (int i = 1; i < k; ++i) EXPECT_TRUE(close(g[i], before[i], 0)) << "reduce_add changed rank " << i;
  }
  {  // all_reduce
    auto g = random_bufs(*gpus, k, n, dt, rng);
    auto c = to_cpu_set(g);
    const CollectiveReport r = gpu_coll->all_reduce(g);
    cpu_coll->all_reduce(c);
    for (int i = 0; i < k; ++i) EXPECT_TRUE(close(g[i], c[i], rtol)) << "all_reduce, rank " << i;
    EXPECT_NEAR(r.busbw, r.algbw * 2.0 * (k - 1) / k, 1e-9 * r.algbw);
  }
  {  // all_gather
    auto in = random_bufs(*gpus, k, n, dt, rng);
    std::vector<Tensor> out, cin = to_cpu_set(in), cout;
    for (int i = 0; i < k; ++i) {
      out.push_back(Tensor::zeros({n * k}, dt, gpus->shared(i)));
      cout.push_back(Tensor::zeros({n * k}, dt, cpus->shared(i)));
    }
    const CollectiveReport r = gpu_coll->all_gather(in, out);
    cpu_coll->all_gather(cin, cout);
    for (int i = 0; i < k; ++i) EXPECT_TRUE(close(out[i], cout[i], 0)) << "all_gather, rank " << i;
    EXPECT_EQ(r.bytes, static_cast<size_t>(n * k) * dtype_size(dt));
  }
  {  // fewer ranks than devices (a small batch yields fewer replicas)
    auto g = random_bufs(*gpus, 2, 17, dt, rng);
    auto c = to_cpu_set(g);
    gpu_coll->reduce_add(g, 0);
    cpu_coll->reduce_add(c, 0);
    EXPECT_TRUE(close(g[0], c[0], rtol)) << "two-rank reduce_add";
  }
}

TEST(CollectivesGpu, PeerCopiesOnVirtualDevicesMatchHostThreads) {
  DPV_REQUIRE_GPU();
  auto set = DeviceSet::create("cuda:0x4");
  EXPECT_EQ(make_collectives(set)->transport(), "peer copies");
  // Same left fold in the same precision: exact equality.
  check_against_host("cuda:0x4", DType::Float32, 0);
  check_against_host("cuda:0x4", DType::Float64, 0);
}

TEST(CollectivesGpu, NcclAcrossDistinctGpus) {
  DPV_REQUIRE_GPU();
  if (cuda_device_count() < 2) GTEST_SKIP() << "NCCL needs two or more GPUs; this machine has " << cuda_device_count();
  auto set = DeviceSet::create("cuda");
  EXPECT_EQ(make_collectives(set)->transport(), "NCCL");
  // NCCL sums in its own order (rings, trees): rounding-level differences in float32.
  check_against_host("cuda", DType::Float32, 1e-6);
  check_against_host("cuda", DType::Float64, 1e-14);
}

TEST(CollectivesGpu, MismatchedBuffersAreErrors) {
  DPV_REQUIRE_GPU();
  auto set = DeviceSet::create("cuda:0x2");
  auto coll = make_collectives(set);
  std::vector<Tensor> wrong_device{Tensor::zeros({8}, DType::Float32, set->shared(1)),
                                   Tensor::zeros({8}, DType::Float32, set->shared(0))};
  EXPECT_THROW(coll->all_reduce(wrong_device), Error);
  std::vector<Tensor> wrong_size{Tensor::zeros({8}, DType::Float32, set->shared(0)),
                                 Tensor::zeros({9}, DType::Float32, set->shared(1))};
  EXPECT_THROW(coll->broadcast(wrong_size, 0), Error);
}

}  // namespace
}  // namespace dpv::test
