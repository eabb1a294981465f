// DDP's GPU control flow without a GPU: in-process DDP on fake GPUs (tests/engine/fake_gpu_backend.h,
// devices of kind Cuda whose ops run later on a compute and a communication queue) gives the same
// bits as on simulated CPU devices, and an iteration stays within its budget of host-to-device
// copies and synchronisations. A missing event between the queues is a data race here, so these
// also run under ThreadSanitizer (scripts/test.sh).
#include <gtest/gtest.h>

#include <future>

#include "counting_backend.h"
#include "dp_test_support.h"
#include "fake_gpu_backend.h"
#include "engine/ddp/ddp.h"
#include "engine/ddp/ddp_output.h"
#include "engine/datasets.h"
#include "engine/model_spec.h"

namespace dpv::testing {
namespace {

struct FakeGpuCase {
  int ranks;
  bool sync_bn;
  bool observed;  // stepped stage by stage with snapshots, or run_to_end unobserved
};

void PrintTo(const FakeGpuCase& c, std::ostream* os) {
  *os << c.ranks << " ranks" << (c.sync_bn ? ", SyncBatchNorm" : "") << (c.observed ? ", stepped" : ", run to end");
}

struct Looker : Observer {
  void on_stage(const StageEvent&) override {}
};

DdpOptions small_buckets(bool sync_bn) {
  DdpOptions o;
  o.sync_bn = sync_bn;
  o.optimizer.lr = 0.05;
  o.optimizer.momentum = 0.9;
  o.optimizer.weight_decay = 0.01;
  o.first_bucket_bytes = 64;  // several buckets after the rebuild: all-reduces overlap the backward
  o.bucket_cap_mb = 0.0001;
  return o;
}

DdpStepOutput train(std::shared_ptr<DeviceSet> devices, const ModelSpec& spec, const TensorMap& state,
                    const Batch& batch, const DdpOptions& o, bool observed, int steps) {
  DdpTrainer trainer(std::move(devices), Model(spec), state, o);
  Looker looker;
  for (int s = 0; s < steps; ++s) {
    DdpIteration it(trainer, batch.input, batch.target, observed ? &looker : nullptr);
    if (observed) {
      it.set_snapshots(true);
      while (it.next_index() < static_cast<int>(it.plan().size())) it.step();
    } else {
      it.run_to_end();
    }
  }
  return ddp_step_output(trainer.results(), spec.dtype);
}

class DdpFakeGpu : public ::testing::TestWithParam<FakeGpuCase> {};

TEST_P(DdpFakeGpu, EqualsSimulatedCpuDevicesBitForBit) {
  const FakeGpuCase c = GetParam();
  const ModelSpec spec = mlp_bn(DType::Float32);
  const TensorMap state = Model(spec).initial_state(21);
  const Batch batch = random_batch(13, 4, 3, 22, DType::Float32);  // 13 rows: padded shards
  const DdpOptions o = small_buckets(c.sync_bn);
  const DdpStepOutput cpu = train(DeviceSet::create("cpu:" + std::to_string(c.ranks)), spec, state, batch, o, c.observed, 3);
  const DdpStepOutput gpu = train(fake_gpu_devices(c.ranks), spec, state, batch, o, c.observed, 3);
  ASSERT_EQ(cpu.tensors.names(), gpu.tensors.names());
  for (const auto& [name, t] : cpu.tensors.items())
    EXPECT_EQ(t.to_doubles(), gpu.tensors.at(name).to_doubles()) << name;
  EXPECT_EQ(cpu.metadata, gpu.metadata);
}

INSTANTIATE_TEST_SUITE_P(Cases, DdpFakeGpu,
                         ::testing::Values(FakeGpuCase{2, false, false}, FakeGpuCase{3, false, false},
                                           FakeGpuCase{3, true, false}, FakeGpuCase{2, true, true},
                                           FakeGpuCase{3, false, true}));

// The CNN preset (convolutions, BatchNorm, several buckets) on two fake GPUs.
TEST(DdpFakeGpuCnn, EqualsSimulatedCpuDevicesBitForBit) {
  const ModelSpec spec = preset_model("cnn");
  const TensorMap state = Model(spec).initial_state(5);
  const Dataset data = make_images(10, 10, 3, 32, 32, 5);
  DdpOptions o = small_buckets(false);
  const Batch batch{data.inputs, data.targets};
  const DdpStepOutput cpu = train(DeviceSet::create("cpu:2"), spec, state, batch, o, false, 2);
  const DdpStepOutput gpu = train(fake_gpu_devices(2), spec, state, batch, o, false, 2);
  for (const auto& [name, t] : cpu.tensors.items())
    EXPECT_EQ(t.to_doubles(), gpu.tensors.at(name).to_doubles()) << name;
}

// What one iteration costs a GPU rank, by design: the batch crosses in two copies (input and
// target, gathered on the host first), and the host waits for the device only where it must:
// the loss value (a copy, not a synchronize), the optimizer step's end, and the driver's one
// wait per rank after the whole iteration. The backward never waits for the buckets' all-reduces.
TEST(DdpFakeGpuBudget, CopiesAndSynchronisationsPerIteration) {
  constexpr int kRanks = 3;
  constexpr int kIterations = 3;
  auto counter = std::make_shared<HostCopyCounter>();
  auto devices = fake_gpu_devices(kRanks, [&] { return std::make_unique<CountingBackend>(counter); });
  const ModelSpec spec = mlp_bn(DType::Float32);
  const Batch batch = random_batch(12, 4, 3, 23, DType::Float32);
  DdpTrainer trainer(devices, Model(spec), Model(spec).initial_state(6), small_buckets(false));
  DdpIteration(trainer, batch.input, batch.target).run_to_end();  // construction's copies are not an iteration's
  for (int i = 0; i < kIterations; ++i) {
    counter->reset();
    DdpIteration(trainer, batch.input, batch.target).run_to_end();
    EXPECT_EQ(counter->to_device.load(), 2 * kRanks) << "host-to-device copies of iteration " << i;
    // optimizer_step's one and run_ranks' one per rank.
    EXPECT_LE(counter->synchronizes.load(), 2 * kRanks) << "synchronize() calls of iteration " << i;
    EXPECT_GE(counter->synchronizes.load(), kRanks);
  }
}

// The fake is asynchronous for real: an op returns before it ran, and an event orders the other queue.
TEST(FakeGpu, OpsRunLaterAndEventsOrderTheQueues) {
  auto devices = fake_gpu_devices(1);
  Device& d = devices->operator[](0);
  auto& be = static_cast<FakeGpuBackend&>(d.backend());
  Tensor t = Tensor::zeros({4}, DType::Float64, devices->shared(0));
  be.synchronize();  // the zeros are in (the fill that makes them was queued too)
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  be.hold(DeviceQueue::Compute, open);
  Tensor u = Tensor::zeros({4}, DType::Float64, devices->shared(0));  // its zeros are queued too
  be.fill(t, 3.0);
  EXPECT_EQ(static_cast<const double*>(t.raw())[0], 0.0) << "the fill ran before the queue reached it";
  const auto filled = be.record_event(DeviceQueue::Compute);  // after both fills
  be.run_on_queue(DeviceQueue::Communication, [&] {
    be.queue_wait(DeviceQueue::Communication, filled);
    be.add_inplace(u, t);  // on the communication queue, after the fill
  });
  gate.set_value();
  be.run_on_queue(DeviceQueue::Communication, [&] { be.synchronize(); });
  EXPECT_EQ(u.to_doubles(), std::vector<double>(4, 3.0));
}

}  // namespace
}  // namespace dpv::testing
