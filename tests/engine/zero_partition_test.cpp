// How the sharded strategies split a model (engine/zero/flat_layout.h), against PyTorch 1.13's
// rules written out here independently: ZeroRedundancyOptimizer._partition_parameters (a stable
// sort by numel, largest first, each parameter to the first rank with the fewest elements), FSDP's
// FlatParameter (model order, zero-padded to a multiple of W, rank r's contiguous slice) and
// _get_gradient_predivide_factor.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/zero/flat_layout.h"

using namespace dpv;

namespace {

std::vector<ParamExtent> extents(const std::vector<std::pair<std::string, Shape>>& params) {
  std::vector<ParamExtent> out;
  for (const auto& [name, shape] : params) out.push_back({name, shape, shape_numel(shape)});
  return out;
}

// Linear(5,7)-BN(7)-ReLU-Linear(7,3): 35, 7, 7, 7, 21, 3 elements.
std::vector<ParamExtent> uneven_mlp() {
  return extents({{"0.weight", {7, 5}}, {"0.bias", {7}}, {"1.weight", {7}}, {"1.bias", {7}},
                  {"3.weight", {3, 7}}, {"3.bias", {3}}});
}

// The greedy rule, step by step as PyTorch runs it, from the other end: simulate with a list of
// (numel, model index) sorted by Python's sorted(key=numel, reverse=True), which is stable.
ZeroPartition reference_partition(const std::vector<ParamExtent>& params, int world) {
  std::vector<std::pair<int64_t, size_t>> order;
  for (size_t i = 0; i < params.size(); ++i) order.push_back({params[i].numel, i});
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  ZeroPartition out(static_cast<size_t>(world));
  std::vector<int64_t> sizes(static_cast<size_t>(world), 0);
  for (const auto& [numel, index] : order) {
    size_t best = 0;
    for (size_t r = 1; r < sizes.size(); ++r)
      if (sizes[r] < sizes[best]) best = r;  // strictly fewer: the lowest rank wins ties
    out[best].push_back(params[index].name);
    sizes[best] += numel;
  }
  return out;
}

}  // namespace

TEST(Zero1Partition, GreedyLargestFirstToTheRankWithFewestElements) {
  // 35 -> r0; 21 -> r1; 7 (0.bias) -> r2; 7 (1.weight) -> r2 (7 < 21); 7 (1.bias) -> r2 (14 < 21);
  // 3: r1 and r2 both hold 21, so the lower, r1. What real ZeroRedundancyOptimizer assigned for
  // this model on 3 Gloo ranks (PyTorch 1.13).
  const ZeroPartition p = zero1_partition(uneven_mlp(), 3);
  EXPECT_EQ(p, (ZeroPartition{{"0.weight"}, {"3.weight", "3.bias"}, {"0.bias", "1.weight", "1.bias"}}));
  for (int W : {1, 2, 3, 4, 5}) EXPECT_EQ(zero1_partition(uneven_mlp(), W), reference_partition(uneven_mlp(), W)) << W;
}

TEST(Zero1Partition, EqualSizesKeepModelOrderAndTiesGoToTheLowestRank) {
  // Four equal parameters on 2 ranks: a, b to r0, r1 (r0 first on the tie), then c to r0, d to r1.
  const auto same = extents({{"a", {4}}, {"b", {4}}, {"c", {4}}, {"d", {4}}});
  EXPECT_EQ(zero1_partition(same, 2), (ZeroPartition{{"a", "c"}, {"b", "d"}}));
  // A smaller parameter earlier in the model still comes after the larger ones: big -> r0, mid and
  // mid2 -> r1 (5 < 10), then both hold 10 and small goes to r0.
  const auto mixed = extents({{"small", {2}}, {"big", {10}}, {"mid", {5}}, {"mid2", {5}}});
  EXPECT_EQ(zero1_partition(mixed, 2), (ZeroPartition{{"big", "small"}, {"mid", "mid2"}}));
  EXPECT_EQ(zero1_partition(mixed, 2), reference_partition(mixed, 2));
}

TEST(Zero1Partition, MoreRanksThanParametersLeavesRanksEmptyAndCoversEveryParameterOnce) {
  const auto two = extents({{"w", {3, 2}}, {"b", {3}}});
  const ZeroPartition p = zero1_partition(two, 4);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p, (ZeroPartition{{"w"}, {"b"}, {}, {}}));
  for (int W : {1, 2, 3, 6, 8}) {
    std::multiset<std::string> seen;
    for (const auto& names : zero1_partition(uneven_mlp(), W)) seen.insert(names.begin(), names.end());
    std::multiset<std::string> all;
    for (const auto& e : uneven_mlp()) all.insert(e.name);
    EXPECT_EQ(seen, all) << "W " << W << ": every parameter on exactly one rank";
  }
  EXPECT_THROW(zero1_partition(two, 0), Error);
}

TEST(Zero1Partition, JsonListsEveryRanksNamesInOrder) {
  const ZeroPartition p = zero1_partition(uneven_mlp(), 4);
  const auto j = nlohmann::json::parse(zero_partition_json(p));
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j.get<ZeroPartition>(), p);
  EXPECT_EQ(zero_partition_json({{"2.weight", "0.weight"}, {"0.bias"}}), R"([["2.weight","0.weight"],["0.bias"]])");
  EXPECT_EQ(zero_partition_json({{"w"}, {}}), R"([["w"],[]])");
}

TEST(FlatLayout, OffsetsAreBackToBackInModelOrderPaddedToAMultipleOfW) {
  const auto params = uneven_mlp();  // 80 elements
  for (int W : {1, 2, 3, 4, 7, 16}) {
    const FlatLayout l = make_flat_layout(params, W);
    SCOPED_TRACE("W " + std::to_string(W));
    EXPECT_EQ(l.world, W);
    EXPECT_EQ(l.numel, 80);
    EXPECT_EQ(l.padded_numel % W, 0);
    EXPECT_GE(l.padded_numel, l.numel);
    EXPECT_LT(l.padded_numel - l.numel, W) << "the fewest zeros that make it divisible";
    EXPECT_EQ(l.padding(), l.padded_numel - 80);
    EXPECT_EQ(l.shard_numel() * W, l.padded_numel);
    ASSERT_EQ(l.entries.size(), params.size());
    int64_t offset = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_EQ(l.entries[i].name, params[i].name);
      EXPECT_EQ(l.entries[i].offset, offset);
      EXPECT_EQ(l.entries[i].numel, params[i].numel);
      EXPECT_EQ(l.entries[i].shape, params[i].shape);
      offset += params[i].numel;
    }
    int64_t real = 0;
    for (int r = 0; r < W; ++r) {
      EXPECT_EQ(l.shard_begin(r), r * l.shard_numel());
      // The real elements of rank r's slice, counted one by one.
      int64_t count = 0;
      for (int64_t i = l.shard_begin(r); i < l.shard_begin(r) + l.shard_numel(); ++i) count += i < l.numel;
      EXPECT_EQ(l.shard_real_numel(r), count) << "rank " << r;
      real += count;
    }
    EXPECT_EQ(real, l.numel);
  }
}

TEST(FlatLayout, AWorldThatDoesNotDivideTheLengthPadsTheLastRanks) {
  // 80 on 3 ranks: 81, 27 each, rank 2 has one padding zero. 80 on 16: 5 each, none. 10 on 4: 12,
  // 3 each, rank 3 has one real element and two zeros.
  FlatLayout l = make_flat_layout(uneven_mlp(), 3);
  EXPECT_EQ(l.padded_numel, 81);
  EXPECT_EQ(l.shard_numel(), 27);
  EXPECT_EQ(l.shard_real_numel(0), 27);
  EXPECT_EQ(l.shard_real_numel(2), 26);
  l = make_flat_layout(uneven_mlp(), 16);
  EXPECT_EQ(l.padded_numel, 80);
  EXPECT_EQ(l.padding(), 0);
  l = make_flat_layout(extents({{"w", {2, 4}}, {"b", {2}}}), 4);
  EXPECT_EQ(l.padded_numel, 12);
  EXPECT_EQ(l.shard_real_numel(2), 3);
  EXPECT_EQ(l.shard_real_numel(3), 1);
  // More ranks than elements: whole slices of padding.
  l = make_flat_layout(extents({{"b", {3}}}), 8);
  EXPECT_EQ(l.padded_numel, 8);
  EXPECT_EQ(l.shard_numel(), 1);
  EXPECT_EQ(l.shard_real_numel(2), 1);
  EXPECT_EQ(l.shard_real_numel(3), 0);
  EXPECT_EQ(l.shard_real_numel(7), 0);
  EXPECT_THROW(make_flat_layout(uneven_mlp(), 0), Error);
}

TEST(FlatLayout, JsonListsNameOffsetNumelInFlatOrder) {
  const FlatLayout l = make_flat_layout(uneven_mlp(), 3);
  const auto j = nlohmann::json::parse(flat_layout_json(l));
  ASSERT_EQ(j.size(), l.entries.size());
  for (size_t i = 0; i < l.entries.size(); ++i) {
    EXPECT_EQ(j[i][0].get<std::string>(), l.entries[i].name);
    EXPECT_EQ(j[i][1].get<int64_t>(), l.entries[i].offset);
    EXPECT_EQ(j[i][2].get<int64_t>(), l.entries[i].numel);
  }
  EXPECT_EQ(flat_layout_json(make_flat_layout(extents({{"0.weight", {3, 4}}, {"0.bias", {3}}}), 2)),
            R"([["0.weight",0,12],["0.bias",12,3]])");
}

TEST(FsdpDivideFactors, PyTorchsLoopAndPrePostMultiplyToTheWorld) {
  // torch/distributed/fsdp/fully_sharded_data_parallel.py (1.13), _get_gradient_predivide_factor:
  //   factor = 1; while world_size % factor == 0 and world_size / factor > factor: factor *= 2
  // and the postdivide factor world_size / predivide.
  auto pytorch_predivide = [](int world) {
    int factor = 1;
    while (world % factor == 0 && static_cast<double>(world) / factor > factor) factor *= 2;
    return static_cast<double>(factor);
  };
  const std::map<int, std::pair<double, double>> known{{1, {1, 1}}, {2, {2, 1}}, {3, {2, 1.5}},
                                                      {4, {2, 2}},  {8, {4, 2}}, {16, {4, 4}}};
  for (const auto& [W, pre_post] : known) {
    const DivideFactors d = fsdp_divide_factors(W);
    EXPECT_EQ(d.pre, pytorch_predivide(W)) << W;
    EXPECT_EQ(d.pre, pre_post.first) << W;
    EXPECT_EQ(d.post, pre_post.second) << W;
    EXPECT_DOUBLE_EQ(d.pre * d.post, W) << W;
  }
  for (int W = 1; W <= 64; ++W) {
    const DivideFactors d = fsdp_divide_factors(W);
    EXPECT_EQ(d.pre, pytorch_predivide(W)) << W;
    EXPECT_DOUBLE_EQ(d.pre * d.post, W) << W;
  }
}
