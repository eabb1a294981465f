// DataParallel and DDP behind the one strategy interface: a front end that holds only a Strategy&
// and a StrategyIteration gets what the concrete classes give.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <numeric>

#include "dp_test_support.h"
#include "engine/ddp/ddp.h"
#include "engine/strategy.h"

using namespace dpv;
using namespace dpv::testing;

namespace {

// Steps `strategy`'s iteration to its end through the interface, one stage at a time.
std::unique_ptr<StrategyIteration> stepped(Strategy& strategy, const Batch& batch) {
  auto it = strategy.begin_iteration(batch.input, batch.target);
  int stages = 0;
  while (!it->finished()) {
    const StageEvent e = it->step();
    EXPECT_EQ(e.index, stages++);
  }
  EXPECT_EQ(stages, static_cast<int>(it->plan().size()));
  return it;
}

}  // namespace

TEST(Strategy, DataParallelThroughTheInterfaceIsTheIteration) {
  const ModelSpec spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(3);
  const Batch batch = random_batch(10, 4, 3, 21);
  Trainer trainer(DeviceSet::create("cpu:3"), Model(spec), state, {});
  Strategy& strategy = trainer;
  EXPECT_EQ(strategy.kind(), StrategyKind::DataParallel);
  EXPECT_STREQ(strategy_name(strategy.kind()), "DataParallel");
  EXPECT_EQ(strategy.transport(), trainer.collectives().transport());
  auto it = stepped(strategy, batch);
  EXPECT_EQ(it->strategy(), StrategyKind::DataParallel);

  const Result direct = run_iteration("cpu:3", spec, state, batch);
  EXPECT_NEAR(it->loss(), direct.loss, 1e-12);
  ASSERT_EQ(it->rank_losses().size(), 1u);
  EXPECT_EQ(it->rank_losses()[0], it->loss());
  std::vector<int64_t> all(10);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(it->output_rows(), all);
  EXPECT_EQ(it->output().dim(0), 10);
  EXPECT_LT(max_abs_diff(it->output().to_doubles(), direct.output), 1e-12);
  EXPECT_EQ(it->batchnorm_stats().size(), direct.bn.size());
}

TEST(Strategy, DdpThroughTheInterfaceReportsEveryRank) {
  const ModelSpec spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(3);
  const Batch batch = random_batch(12, 4, 3, 22);
  DdpTrainer trainer(DeviceSet::create("cpu:3"), Model(spec), state, {});
  Strategy& strategy = trainer;
  EXPECT_EQ(strategy.kind(), StrategyKind::DistributedDataParallel);
  EXPECT_STREQ(strategy_name(strategy.kind()), "DistributedDataParallel");
  auto it = stepped(strategy, batch);
  EXPECT_EQ(it->strategy(), StrategyKind::DistributedDataParallel);

  const std::vector<double> losses = it->rank_losses();
  ASSERT_EQ(losses.size(), 3u);
  for (int r = 0; r < 3; ++r) EXPECT_DOUBLE_EQ(losses[static_cast<size_t>(r)], trainer.rank(r).loss()) << r;
  EXPECT_DOUBLE_EQ(it->loss(), losses[0]) << "loss() is rank 0's own, as rank 0 prints it";
  // DistributedSampler without shuffling: rank 0 takes rows 0, 3, 6, 9.
  EXPECT_EQ(it->output_rows(), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(it->output().dim(0), 4);
  EXPECT_EQ(it->output().to_doubles(), trainer.rank(0).output().to_doubles());
  EXPECT_FALSE(it->batchnorm_stats().empty());

  // A second iteration through the interface runs without construction: the plan is shorter.
  const size_t first_plan = it->plan().size();
  it.reset();
  auto second = strategy.begin_iteration(batch.input, batch.target);
  EXPECT_LT(second->plan().size(), first_plan);
  second->run_to_end();
  EXPECT_TRUE(second->finished());
}

// A learning rate set between iterations is the one the next Step uses (plain SGD: the update is
// exactly lr * grad), for DataParallel and for every DDP rank, before and after DDP's construction.
TEST(Strategy, LearningRateSetBetweenIterationsDrivesTheNextStep) {
  const ModelSpec spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(5);
  const Batch batch = random_batch(12, 4, 3, 23);
  std::vector<std::unique_ptr<Strategy>> strategies;
  strategies.push_back(std::make_unique<Trainer>(DeviceSet::create("cpu:3"), Model(spec), state, TrainOptions{}));
  strategies.push_back(std::make_unique<DdpTrainer>(DeviceSet::create("cpu:3"), Model(spec), state, DdpOptions{}));
  for (auto& strategy : strategies) {
    SCOPED_TRACE(strategy_name(strategy->kind()));
    const Model model(spec);
    const std::string name = model.parameter_decls().front().name;
    std::vector<double> before = state.at(name).to_doubles();
    for (const double lr : {0.5, 0.125}) {  // the first before DDP's construction, the second after
      strategy->set_learning_rate(lr);
      auto it = strategy->begin_iteration(batch.input, batch.target);
      it->run_to_end();
      const StrategyTensors tensors = strategy->tensors();
      const std::vector<double> after = tensors.params->at(name).to_doubles();
      const std::vector<double> grad = tensors.grads->at(name).to_doubles();
      ASSERT_EQ(after.size(), before.size());
      for (size_t i = 0; i < after.size(); ++i)
        EXPECT_NEAR(after[i], before[i] - lr * grad[i], 1e-6) << name << "[" << i << "] at lr " << lr;
      before = after;
    }
    EXPECT_THROW(strategy->set_learning_rate(-0.1), Error);
    EXPECT_THROW(strategy->set_learning_rate(std::nan("")), Error);
  }
}

// Every tensor of a state-dict entry (parameter, buffer, .grad, momentum) says which entry it
// belongs to, so a front end can name it as the user's program does; nothing else claims one.
TEST(Strategy, SnapshotsSayWhichStateEntryATensorBelongsTo) {
  const ModelSpec spec = mlp_bn();
  const Model model(spec);
  const TensorMap state = model.initial_state(4);
  const Batch batch = random_batch(12, 4, 3, 24);
  std::set<std::string> entries;
  for (const auto& d : model.parameter_decls()) entries.insert(d.name);
  for (const auto& d : model.buffer_decls()) entries.insert(d.name);
  TrainOptions dp_options;
  dp_options.optimizer.momentum = 0.9;
  DdpOptions ddp_options;
  ddp_options.optimizer.momentum = 0.9;
  std::vector<std::unique_ptr<Strategy>> strategies;
  strategies.push_back(std::make_unique<Trainer>(DeviceSet::create("cpu:2"), Model(spec), state, dp_options));
  strategies.push_back(std::make_unique<DdpTrainer>(DeviceSet::create("cpu:2"), Model(spec), state, ddp_options));
  for (auto& strategy : strategies) {
    SCOPED_TRACE(strategy_name(strategy->kind()));
    for (int iteration = 0; iteration < 2; ++iteration) {  // the second has momentum buffers
      auto it = strategy->begin_iteration(batch.input, batch.target);
      it->set_snapshots(true);
      std::map<TensorRole, int> claimed;
      while (!it->finished()) {
        const StageEvent e = it->step();
        for (const DeviceState& device : e.devices)
          for (const TensorInfo& t : device.tensors) {
            const bool of_state = t.role == TensorRole::Param || t.role == TensorRole::Buffer ||
                                  t.role == TensorRole::Optimizer || (t.role == TensorRole::Grad && t.memory == MemoryKind::Gradients);
            if (!of_state) {
              EXPECT_TRUE(t.state_entry.empty()) << t.name << " claims " << t.state_entry;
              continue;
            }
            EXPECT_TRUE(entries.count(t.state_entry)) << t.name << ": '" << t.state_entry << "'";
            EXPECT_NE(t.name.find(t.state_entry), std::string::npos) << t.name;
            ++claimed[t.role];
          }
      }
      EXPECT_GT(claimed[TensorRole::Param], 0);
      EXPECT_GT(claimed[TensorRole::Grad], 0);
      if (iteration == 1) { EXPECT_GT(claimed[TensorRole::Optimizer], 0); }
    }
  }
}
