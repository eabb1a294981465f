// `dpv bench memory`: the table and the JSON for the `simple` preset (nn.Linear(10, 2), Ψ = 22)
// on three ranks with Adam, against bytes counted by hand, and its flag errors.
#include <cmath>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/run_dpv.h"

namespace dpv::testing {
namespace {

class BenchMemory : public CliTest {};

// nn.Linear(10, 2): 0.weight 20, 0.bias 2 elements. Three ranks: FSDP pads 22 to 24, slices of 8.
// ZeroRedundancyOptimizer: 0.weight -> rank 0, 0.bias -> rank 1 (fewest elements), rank 2 none.
constexpr int64_t kPsi = 22, kSlice = 8, kF32 = 4, kAdam = 2;
constexpr int64_t kZero1Owned[3] = {20, 2, 0};

nlohmann::json read_json(const std::string& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

const nlohmann::json& strategy(const nlohmann::json& j, const std::string& name) {
  for (const auto& s : j.at("strategies"))
    if (s.at("strategy") == name) return s;
  throw std::runtime_error("no strategy " + name + " in the JSON");
}

TEST_F(BenchMemory, TableAndJsonHoldTheHandCountedBytes) {
  const std::string json = path("memory.json");
  const RunResult r = run_dpv({"bench", "memory", "--preset", "simple", "--devices", "cpu:3", "--optimizer", "adam",
                               "--batch", "12", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* line : {"DDP (DistributedDataParallel)", "ZeRO-1 (ZeroRedundancyOptimizer)",
                           "ZeRO-2 (FSDP(SHARD_GRAD_OP))", "ZeRO-3 (FSDP(FULL_SHARD))", "   2 persistent",
                           "rank 0 between iterations against the formula", "DDP's gradient buckets",
                           "padded from Ψ = 22 to L = 24"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  EXPECT_EQ(r.out.find("NOT EXPLAINED"), std::string::npos) << r.out;

  const nlohmann::json j = read_json(json);
  EXPECT_EQ(j.at("parameters"), kPsi);
  EXPECT_EQ(j.at("padded_parameters"), 24);
  EXPECT_EQ(j.at("world"), 3);
  EXPECT_EQ(j.at("batch"), 12);
  EXPECT_EQ(j.at("optimizer"), "adam");
  ASSERT_EQ(j.at("strategies").size(), 4u);
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const auto& ddp = strategy(j, "DDP").at("ranks").at(rank).at("persistent");
    EXPECT_EQ(ddp.at("parameters"), kPsi * kF32);
    EXPECT_EQ(ddp.at("gradients"), kPsi * kF32);
    EXPECT_EQ(ddp.at("optimizer"), kAdam * kPsi * kF32);
    EXPECT_EQ(ddp.at("buckets"), kPsi * kF32);
    const auto& z1 = strategy(j, "ZeRO-1").at("ranks").at(rank).at("persistent");
    EXPECT_EQ(z1.at("optimizer"), kAdam * kZero1Owned[rank] * kF32);
    for (const char* fsdp : {"ZeRO-2", "ZeRO-3"}) {
      const auto& z = strategy(j, fsdp).at("ranks").at(rank);
      EXPECT_EQ(z.at("persistent").at("parameters"), kSlice * kF32) << fsdp;
      EXPECT_EQ(z.at("persistent").at("gradients"), kSlice * kF32) << fsdp;
      EXPECT_EQ(z.at("persistent").at("optimizer"), kAdam * kSlice * kF32) << fsdp;
      EXPECT_EQ(z.at("peak").at("gathered"), 24 * kF32) << fsdp;
    }
  }
  // The formula: (4 + 4 + 8) x 22 for DDP, (4 + 4 + 8) x 22 / 3 for ZeRO-3.
  EXPECT_DOUBLE_EQ(strategy(j, "DDP").at("formula_bytes").get<double>(), 16.0 * kPsi);
  EXPECT_DOUBLE_EQ(strategy(j, "ZeRO-3").at("formula_bytes").get<double>(), 16.0 * kPsi / 3);
  EXPECT_DOUBLE_EQ(strategy(j, "ZeRO-3").at("mixed_formula_bytes").get<double>(), 16.0 * kPsi / 3);
  // Rank 0's difference lines add up to measured minus formula, at both points.
  for (const auto& s : j.at("strategies"))
    for (const char* point : {"persistent", "peak"}) {
      SCOPED_TRACE(s.at("strategy").get<std::string>() + " " + point);
      double sum = 0;
      for (const auto& d : s.at("differences"))
        if (d.at("point") == point) {
          sum += d.at("bytes").get<double>();
          EXPECT_TRUE(d.at("explained").get<bool>()) << d.at("why");
        }
      const double measured = s.at("ranks").at(0).at(point).at("total").get<double>();
      EXPECT_NEAR(sum, measured - s.at("formula_bytes").get<double>(), 1.5);
    }
  // Every stage of the measured iteration, every rank.
  EXPECT_EQ(strategy(j, "ZeRO-3").at("stages").at(0).at("ranks").size(), 3u);
}

TEST_F(BenchMemory, TimingAddsMillisecondsPerStep) {
  const std::string json = path("timed.json");
  const RunResult r = run_dpv({"bench", "memory", "--preset", "simple", "--devices", "cpu:2", "--timing-iters", "3",
                               "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ms/step"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ms per step by stage:"), std::string::npos) << r.out;
  for (const auto& s : read_json(json).at("strategies")) {
    EXPECT_GT(s.at("ms_per_step").get<double>(), 0);
    // Every stage kind of the strategy's plan, ZeRO's own included (cli/stage_totals.h counts them).
    const auto& stages = s.at("stage_ms_per_step");
    EXPECT_TRUE(stages.contains("forward")) << stages;
    if (s.at("strategy") == "ZeRO-1") {
      EXPECT_TRUE(stages.contains("broadcast_params")) << stages;
    }
    if (s.at("strategy") == "ZeRO-3") {
      EXPECT_TRUE(stages.contains("free_params")) << stages;
    }
  }
}

TEST_F(BenchMemory, FlagErrors) {
  const std::string json = path("never.json");
  expect_error(run_dpv({"bench", "memory", "--preset", "nope", "--json", json}),
               {"--preset: unknown model preset 'nope'"}, json);
  expect_error(run_dpv({"bench", "memory", "--devices", "cpu:0", "--json", json}), {"--devices: invalid device spec"},
               json);
  expect_error(run_dpv({"bench", "memory", "--json", path("no/such/folder/x.json")}), {"--json:", "No such file"});
  expect_error(run_dpv({"bench", "memory", "--json", dir_.string()}), {"--json:", "Is a directory"});
  expect_error(run_dpv({"bench", "memory", "--preset", "mlp-large", "--batch", "100000000000", "--json", json}),
               {"--batch 100000000000 asks for", "machine's memory"}, json);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--batch", "0"}, {"--batch", "x"}, {"--timing-iters", "-1"}, {"--optimizer", "rms"},
           {"--optimizer", "adam", "--momentum", "0.9"}}) {
    std::vector<std::string> full{"bench", "memory", "--json", json};
    full.insert(full.end(), args.begin(), args.end());
    const RunResult r = run_dpv(full);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(args.back() == "0.9" ? "--momentum" : args[0]), std::string::npos) << r.err;
    EXPECT_FALSE(exists(json));
  }
}

}  // namespace
}  // namespace dpv::testing
