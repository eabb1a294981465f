// `dpv step --ddp`: the output contract (names, shapes, dtypes, the ddp.buckets metadata), options
// that only DDP has refused without --ddp, and PyTorch's errors.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/io/safetensors.h"
#include "run_dpv.h"

using namespace dpv;
using namespace dpv::testing;

namespace {
class DdpStepCli : public CliTest {};

nlohmann::json metadata_of(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  return nlohmann::json::parse(header).at("__metadata__");
}
}  // namespace

TEST_F(DdpStepCli, WritesTheContract) {
  const std::string model = write_text("model.json", bn_mlp_json());
  const std::string batch = write_batch("batch.safetensors", {10, 2}, DType::Float32, 3);
  const std::string out = path("out.safetensors");
  RunResult r = run_dpv({"step", "--ddp", "--model", model, "--batch", batch, "--devices", "cpu:4", "--steps", "2",
                         "--sync-bn", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const TensorMap t = load_safetensors(out);
  EXPECT_EQ(t.at("loss").shape(), Shape{});
  EXPECT_EQ(t.at("loss").dtype(), DType::Float32);
  for (int rank = 0; rank < 4; ++rank) {
    const std::string p = "rank" + std::to_string(rank) + "/";
    EXPECT_EQ(t.at(p + "output").shape(), (Shape{3, 3}));  // 10 samples on 4 ranks: 3 each (padded)
    EXPECT_EQ(t.at(p + "loss").shape(), Shape{});
    EXPECT_EQ(t.at(p + "state/1.num_batches_tracked").dtype(), DType::Int64);
    EXPECT_EQ(t.at(p + "state/1.num_batches_tracked").to_int64()[0], 2);
    EXPECT_FALSE(t.contains(p + "state/0.weight"));  // buffers only
    EXPECT_EQ(t.at("stats/1/dev" + std::to_string(rank) + "/mean").shape(), Shape{16});
  }
  EXPECT_TRUE(t.contains("stats/1/global/var"));
  EXPECT_EQ(t.at("grad/0.weight").shape(), (Shape{16, 2}));
  EXPECT_EQ(t.at("state/0.weight").shape(), (Shape{16, 2}));
  const auto buckets = nlohmann::json::parse(metadata_of(out).at("ddp.buckets").get<std::string>());
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].size(), 10u);
  EXPECT_EQ(buckets[0][0], "6.bias");  // rebuilt in ready order after the first step
}

TEST_F(DdpStepCli, DdpOnlyOptionsNeedDdp) {
  const std::string model = write_text("model.json", bn_mlp_json());
  const std::string batch = write_batch("batch.safetensors", {8, 2}, DType::Float32, 3);
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--no-broadcast-buffers"}, std::vector<std::string>{"--bucket-cap-mb", "5"}}) {
    std::vector<std::string> args{"step", "--model", model, "--batch", batch, "--devices", "cpu:2", "--out",
                                  path("o.safetensors")};
    args.insert(args.end(), extra.begin(), extra.end());
    RunResult r = run_dpv(args);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find(extra[0] + " requires --ddp"), std::string::npos) << r.err;
    EXPECT_FALSE(exists(path("o.safetensors")));
  }
}

TEST_F(DdpStepCli, OneSampleBatchNormShardFailsAsInPyTorch) {
  const std::string model = write_text("model.json", bn_mlp_json());
  const std::string batch = write_batch("batch.safetensors", {4, 2}, DType::Float32, 3);
  const std::string out = path("o.safetensors");
  RunResult r = run_dpv({"step", "--ddp", "--model", model, "--batch", batch, "--devices", "cpu:4", "--out", out});
  expect_error(r, {"ValueError: Expected more than 1 value per channel when training, got input size torch.Size([1, 16])"},
               out);
}

// SyncBatchNorm on one rank has nothing to merge (PyTorch normalises as BatchNorm there), yet the
// output promises the global statistics with --sync-bn: the rank's own, the whole batch's, as
// DataParallel on one device writes them.
TEST_F(DdpStepCli, SyncBnOnOneRankWritesTheRanksStatisticsAsGlobal) {
  const std::string model = write_text("model.json", bn_mlp_json());
  const std::string batch = write_batch("batch.safetensors", {10, 2}, DType::Float32, 3);
  const std::string ddp = path("ddp.safetensors"), dp = path("dp.safetensors");
  RunResult r = run_dpv({"step", "--ddp", "--sync-bn", "--model", model, "--batch", batch, "--devices", "cpu:1",
                         "--steps", "2", "--out", ddp});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_dpv({"step", "--sync-bn", "--model", model, "--batch", batch, "--devices", "cpu:1", "--steps", "2",
               "--out", dp});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const TensorMap t = load_safetensors(ddp), single = load_safetensors(dp);
  for (const std::string layer : {"1", "4"}) {
    for (const std::string what : {"mean", "var"}) {
      const std::string global = "stats/" + layer + "/global/" + what, dev0 = "stats/" + layer + "/dev0/" + what;
      ASSERT_TRUE(t.contains(global)) << global;
      EXPECT_EQ(t.at(global).shape(), Shape{16});
      EXPECT_EQ(t.at(global).dtype(), DType::Float32);
      EXPECT_EQ(t.at(global).to_doubles(), t.at(dev0).to_doubles()) << global;
      // The whole batch's statistics: what DataParallel on one device reports.
      EXPECT_EQ(t.at(global).to_doubles(), single.at(global).to_doubles()) << global;
    }
  }
  EXPECT_FALSE(t.contains("stats/1/dev1/mean"));
}

TEST_F(DdpStepCli, DevicesIsRequiredOutsideALaunchedJob) {
  const std::string model = write_text("model.json", bn_mlp_json());
  const std::string batch = write_batch("batch.safetensors", {8, 2}, DType::Float32, 3);
  for (const bool ddp : {false, true}) {
    std::vector<std::string> args{"step", "--model", model, "--batch", batch, "--out", path("o.safetensors")};
    if (ddp) args.push_back("--ddp");
    RunResult r = run_dpv(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--devices is required"), std::string::npos) << r.err;
    EXPECT_FALSE(exists(path("o.safetensors")));
  }
}
