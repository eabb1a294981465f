// Allocations in the steady state of training: this binary replaces the global operator new to
// count heap allocations (every thread), and reads each device's allocation counter (tensor
// storages the caching allocator had to take from the system). It is its own test binary so that
// the counting operator new affects no other test.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/data_parallel.h"
#include "engine/model_data.h"
#include "engine/model_spec.h"

namespace {
std::atomic<int64_t> g_heap_allocations{0};
}

void* operator new(std::size_t n) {
  g_heap_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  g_heap_allocations.fetch_add(1, std::memory_order_relaxed);
  const size_t al = static_cast<size_t>(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace dpv {
namespace {

int64_t heap_allocations() { return g_heap_allocations.load(); }

struct StepCounts {
  int64_t heap = 0;
};

StepCounts count_step(Trainer& trainer, const Dataset& data) {
  const int64_t before = heap_allocations();
  Iteration(trainer, data.inputs, data.targets).run_to_end();
  return {heap_allocations() - before};
}

// BatchNorm + ReLU through the backend ops a step runs, fused and unfused: after the first call
// has grown the per-thread scratch, none of them allocates.
TEST(StepAllocations, BatchNormOpsAllocateNothingOnceWarm) {
  auto backend = make_cpu_backend();
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int64_t S : {int64_t{1}, int64_t{6}}) {
      const int64_t N = 8, C = 5;
      Tensor x = Tensor::full({N, C, S}, dt, 0.5), dy = Tensor::full({N, C, S}, dt, 0.25);
      Tensor y = Tensor::empty({N, C, S}, dt), dx = Tensor::empty({N, C, S}, dt);
      Tensor mean = Tensor::empty({C}, dt), var = Tensor::empty({C}, dt), invstd = Tensor::empty({C}, dt);
      Tensor gamma = Tensor::full({C}, dt, 1.0), beta = Tensor::full({C}, dt, 0.0);
      Tensor s1 = Tensor::empty({C}, dt), s2 = Tensor::empty({C}, dt);
      auto all_ops = [&] {
        backend->bn_stats(x, mean, var, N, C, S);
        backend->bn_invstd(var, 1e-5, invstd);
        backend->bn_normalize(x, mean, invstd, gamma, beta, y, N, C, S);
        backend->bn_normalize_relu(x, mean, invstd, gamma, beta, y, N, C, S);
        backend->bn_backward_reduce(dy, x, mean, s1, s2, N, C, S);
        backend->bn_backward_elemt(dy, x, mean, invstd, gamma, s1, s2, double(N * S), dx, N, C, S);
        backend->bn_relu_backward(dy, y, x, mean, invstd, gamma, s1, s2, double(N * S), dx, N, C, S);
        backend->sum_channels(dy, s1, N, C, S, false);
        backend->add_channel_bias(y, beta, N, C, S);
      };
      all_ops();
      const int64_t before = heap_allocations();
      all_ops();
      EXPECT_EQ(heap_allocations() - before, 0) << dtype_name(dt) << ", S = " << S;
    }
  }
}

// Training steps of the BatchNorm MLPs on one device: once the caching allocator's free lists and
// the per-thread scratch have grown (two steps), every further step allocates the same (nothing
// grows step after step), and no more than kSteadyStepAllocations: what still allocates is tensor
// handles (each tensor's shared storage and shape vector), the replica's maps and the iteration's
// own state. The plan and its titles are built once per trainer, and a step run without an
// observer builds no texts. Lower the bound when a change allocates less; a change that needs
// more must say why.
constexpr int64_t kSteadyStepAllocations = 168;

TEST(StepAllocations, SteadyStepsAllocateTheSame) {
  for (const char* preset : {"mnist-mlp", "mlp-bn"}) {
    const ModelSpec spec = preset_model(preset);
    const Dataset data = make_data_for_model(spec, 64, 1);
    Model model(spec);
    const TensorMap state = model.initial_state(0);
    Trainer trainer(DeviceSet::create("cpu:1"), Model(spec), state, TrainOptions{});
    const StepCounts first = count_step(trainer, data);
    const StepCounts second = count_step(trainer, data);
    const StepCounts third = count_step(trainer, data);
    const StepCounts fourth = count_step(trainer, data);
    std::printf("[ info ] %s, one device: heap allocations per step %lld, %lld, %lld, %lld (steps 1-4)\n", preset,
                static_cast<long long>(first.heap), static_cast<long long>(second.heap),
                static_cast<long long>(third.heap), static_cast<long long>(fourth.heap));
    EXPECT_EQ(third.heap, fourth.heap) << preset;
    EXPECT_LE(third.heap, second.heap) << preset;
    EXPECT_LE(fourth.heap, kSteadyStepAllocations) << preset;
  }
}

}  // namespace
}  // namespace dpv
