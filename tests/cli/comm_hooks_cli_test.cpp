// `dpv step --ddp --comm-hook ...`: the flags' refusals, the PowerSGD output contract, and the same
// hook under `dpv launch` (Gloo processes) as on in-process ranks. Agreement with real PyTorch is
// tests/fixtures/compare_with_pytorch_comm_hooks.py's.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/io/safetensors.h"
#include "launch_helpers.h"
#include "run_dpv.h"

namespace dpv::testing {
namespace {

class CommHookCli : public CliTest {
 protected:
  std::vector<std::string> step(const std::vector<std::string>& extra, const std::string& out = "out.safetensors") {
    if (model_.empty()) {
      model_ = write_text("model.json", R"({"layers": [{"type": "linear", "in_features": 6, "out_features": 32},
        {"type": "relu"}, {"type": "linear", "in_features": 32, "out_features": 3}], "loss": "cross_entropy"})");
      batch_ = write_batch("batch.safetensors", {9, 6}, DType::Float32, 3);
    }
    std::vector<std::string> args{"step", "--model", model_, "--batch", batch_, "--out", path(out)};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  std::string model_, batch_;
};

TEST_F(CommHookCli, RefusesFlagsThatDoNotFit) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--devices", "cpu:2", "--comm-hook", "fp16"}, "--comm-hook requires --ddp"},
      {{"--devices", "cpu:2", "--zero", "1", "--comm-hook", "fp16"}, "not with --zero 1"},
      {{"--devices", "cpu:2", "--ddp", "--powersgd-rank", "2"}, "--powersgd-rank requires --comm-hook powersgd"},
      {{"--devices", "cpu:2", "--ddp", "--comm-hook", "powersgd", "--powersgd-rank", "0"}, "--powersgd-rank"},
      {{"--devices", "cpu:2", "--ddp", "--comm-hook", "powersgd", "--powersgd-rank", "3"}, "--powersgd-rank"},
      {{"--devices", "cpu:2", "--ddp", "--comm-hook", "powersgd", "--powersgd-start-iter", "1"},
       "Expect `start_powerSGD_iter` > 1"},
      {{"--devices", "cpu:2", "--ddp", "--comm-hook", "powersgd", "--powersgd-seed", "-1"}, "--powersgd-seed"},
      {{"--devices", "cpu:2", "--ddp", "--comm-hook", "int8"}, "--comm-hook"},
  };
  for (const auto& [extra, says] : cases) {
    const RunResult r = run_dpv(step(extra));
    EXPECT_EQ(r.exit_code, 2) << says << "\n" << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_FALSE(exists(path("out.safetensors")));
  }
  // Without error feedback and warm start PyTorch takes start_powerSGD_iter 1.
  const RunResult ok = run_dpv(step({"--devices", "cpu:2", "--ddp", "--comm-hook", "powersgd", "--powersgd-start-iter",
                                     "1", "--powersgd-no-error-feedback", "--powersgd-no-warm-start"}));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

TEST_F(CommHookCli, Bf16IsRefusedWithGloosReason) {
  const RunResult r = run_dpv(step({"--devices", "cpu:2", "--ddp", "--comm-hook", "bf16"}));
  expect_error(r, {"bf16_compress_hook", "Invalid scalar type", "use fp16_compress_hook"}, path("out.safetensors"));
}

TEST_F(CommHookCli, PowerSgdWritesItsStateAndSendsFewerBytes) {
  const RunResult r = run_dpv(step({"--devices", "cpu:3", "--ddp", "--steps", "4", "--comm-hook", "powersgd",
                                    "--powersgd-start-iter", "2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const TensorMap t = load_safetensors(path("out.safetensors"));
  const auto sent = t.at("comm_hook/bytes_sent").to_int64();
  const auto full = t.at("comm_hook/bytes_uncompressed").to_int64();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(full[0], (6 * 32 + 32 + 32 * 3 + 3) * 4);
  // Rank 1: the 32x6 weight as P [32] and Q [6] ((32 + 6) * 2 < 192), the 3x32 one as P [3] and
  // Q [32] ((3 + 32) * 2 < 96); the biases as they are.
  EXPECT_EQ(sent[0], ((32 + 3) + (6 + 32) + (32 + 3)) * 4);
  for (int rank = 0; rank < 3; ++rank) {
    const std::string p = "rank" + std::to_string(rank) + "/powersgd/";
    EXPECT_EQ(t.at(p + "iter").to_int64()[0], 4);
    EXPECT_EQ(t.at(p + "error/0").shape(), Shape{full[0] / 4});
    EXPECT_EQ(t.at(p + "p/0").shape(), Shape{35});
    EXPECT_EQ(t.at(p + "q/0").shape(), Shape{38});
  }
}

TEST_F(CommHookCli, LaunchedRanksGiveTheInProcessResult) {
  const std::vector<std::string> hook{"--ddp", "--steps", "4", "--comm-hook", "powersgd", "--powersgd-start-iter", "2",
                                      "--powersgd-seed", "11"};
  std::vector<std::string> in_process = step(hook, "threads.safetensors");
  in_process.insert(in_process.end(), {"--devices", "cpu:2"});
  RunResult r = run_dpv(in_process);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> args{"launch", "--nproc-per-node", "2", "--master-port", std::to_string(free_port()),
                                "--timeout", "60", "--"};
  for (const std::string& a : step(hook, "processes.safetensors")) args.push_back(a);
  r = run_dpv(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const TensorMap threads = load_safetensors(path("threads.safetensors"));
  const TensorMap processes = load_safetensors(path("processes.safetensors"));
  for (const std::string name : {"grad/0.weight", "grad/2.bias", "state/0.weight", "rank0/powersgd/q/0",
                                 "rank0/powersgd/error/0"}) {
    const auto a = threads.at(name).to_doubles(), b = processes.at(name).to_doubles();
    ASSERT_EQ(a.size(), b.size()) << name;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 + 1e-4 * std::abs(b[i])) << name << "[" << i << "]";
  }
  EXPECT_FALSE(processes.contains("rank1/powersgd/iter"));  // each rank keeps its own state
}

TEST_F(CommHookCli, HooksThatDifferAcrossRanksAreNamed) {
  const std::string port = std::to_string(free_port());
  auto node = [&](int node_rank, const std::string& hook) {
    std::vector<std::string> args{"launch", "--nproc-per-node", "1", "--nnodes", "2", "--node-rank",
                                  std::to_string(node_rank), "--master-port", port, "--timeout", "20", "--"};
    for (const std::string& a : step({"--ddp", "--comm-hook", hook})) args.push_back(a);
    return args;
  };
  Background node0(node(0, "allreduce"));
  RunResult r1 = run_dpv(node(1, "fp16"));
  RunResult r0 = node0.finish(std::chrono::seconds(60));
  const std::string says = "comm_hook is fp16_compress_hook on rank 1 but allreduce_hook on rank 0";
  EXPECT_EQ(r0.exit_code, 1);
  EXPECT_EQ(r1.exit_code, 1);
  EXPECT_NE(r0.err.find(says), std::string::npos) << r0.err;
  EXPECT_NE(r1.err.find(says), std::string::npos) << r1.err;
  EXPECT_FALSE(exists(path("out.safetensors")));
}

}  // namespace
}  // namespace dpv::testing
