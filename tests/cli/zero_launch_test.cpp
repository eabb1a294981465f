// `dpv step --zero S` as real processes: `dpv launch --nproc-per-node W -- step --zero S ...` writes
// the tensors of the in-process `dpv step --zero S --devices cpu:W` (within float tolerance: Gloo's
// collectives add the ranks' values in another order) and the same metadata but `launched`, for
// ZeRO-1, 2 and 3 on 2 and 3 ranks; ranks started with different --zero stop with a message that
// names the setting instead of meeting in different collectives.
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/io/safetensors.h"
#include "launch_helpers.h"
#include "run_dpv.h"

namespace dpv::testing {
namespace {

// The "__metadata__" of a safetensors file.
std::map<std::string, std::string> metadata_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  const nlohmann::json h = nlohmann::json::parse(header);
  std::map<std::string, std::string> out;
  if (h.contains("__metadata__"))
    for (const auto& [k, v] : h["__metadata__"].items()) out[k] = v.get<std::string>();
  return out;
}

// Linear(5,7,bias=False)-BN(7)-ReLU-Linear(7,3) in float64: 73 parameter elements, so the flat
// parameter is padded on 2 ranks (74) and on 3 (75). No bias before the BatchNorm: its gradient is
// rounding noise, which Adam would scale up to a step of about lr.
constexpr const char* kModel =
    R"({"layers": [{"type": "linear", "in_features": 5, "out_features": 7, "bias": false},
    {"type": "batchnorm1d", "num_features": 7}, {"type": "relu"},
    {"type": "linear", "in_features": 7, "out_features": 3}], "loss": "cross_entropy", "dtype": "float64"})";

class ZeroLaunch : public CliTest {
 protected:
  std::vector<std::string> step(int zero, const std::string& out) const {
    return {"step", "--zero", std::to_string(zero), "--model", model_, "--batch", batch_, "--optimizer", "adam",
            "--lr", "0.01", "--weight-decay", "0.001", "--steps", "2", "--seed", "7", "--out", out};
  }
  void SetUp() override {
    CliTest::SetUp();
    model_ = write_text("model.json", kModel);
    batch_ = write_batch("batch.safetensors", {11, 5}, DType::Float64, 3);  // 11 rows: padded shards
  }
  std::string model_, batch_;
};

TEST_F(ZeroLaunch, ProcessesWriteWhatInProcessRanksWrite) {
  for (int world : {2, 3}) {
    for (int zero : {1, 2, 3}) {
      const std::string name = "zero" + std::to_string(zero) + "-w" + std::to_string(world);
      SCOPED_TRACE(name);
      const std::string threads = path(name + "-threads.safetensors"), procs = path(name + "-procs.safetensors");
      std::vector<std::string> in_process = step(zero, threads);
      in_process.insert(in_process.end(), {"--devices", "cpu:" + std::to_string(world)});
      RunResult r = run_dpv(in_process);
      ASSERT_EQ(r.exit_code, 0) << r.err;

      std::vector<std::string> launched{"launch", "--nproc-per-node", std::to_string(world), "--master-port",
                                        std::to_string(free_port()), "--timeout", "60", "--"};
      for (const std::string& a : step(zero, procs)) launched.push_back(a);
      r = run_dpv(launched);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      EXPECT_NE(r.out.find("dpv step --zero " + std::to_string(zero)), std::string::npos) << r.out;
      EXPECT_NE(r.out.find(std::to_string(world) + " launched processes over gloo"), std::string::npos) << r.out;

      const TensorMap want = load_safetensors(threads), got = load_safetensors(procs);
      EXPECT_EQ(got.names(), want.names());
      int compared = 0;
      for (const auto& [tensor, w] : want.items()) {
        const Tensor* g = got.find(tensor);
        if (!g) continue;
        ASSERT_EQ(g->shape(), w.shape()) << tensor;
        ASSERT_EQ(g->dtype(), w.dtype()) << tensor;
        const std::vector<double> gv = g->to_doubles(), wv = w.to_doubles();
        for (size_t i = 0; i < wv.size(); ++i)
          ASSERT_LE(std::abs(gv[i] - wv[i]), 1e-12 + 1e-10 * std::abs(wv[i])) << tensor << "[" << i << "]";
        ++compared;
      }
      // The sharded strategy's own tensors are there to compare.
      const std::string own = zero == 1 ? "rank0/optim/" : "rank" + std::to_string(world - 1) + "/flat/exp_avg_sq";
      bool found = false;
      for (const std::string& n : want.names()) found = found || n.rfind(own, 0) == 0;
      EXPECT_TRUE(found) << own;
      EXPECT_GT(compared, 10);

      std::map<std::string, std::string> meta_threads = metadata_of(threads), meta_procs = metadata_of(procs);
      EXPECT_EQ(meta_procs.count("launched"), 1u);
      EXPECT_EQ(meta_threads.count("launched"), 0u);
      meta_procs.erase("launched");
      EXPECT_EQ(meta_procs, meta_threads);
      EXPECT_EQ(meta_threads.at("zero.stage"), std::to_string(zero));
      EXPECT_EQ(meta_threads.at("producer"), "dpv step --zero " + std::to_string(zero));
      EXPECT_EQ(meta_threads.count(zero == 1 ? "zero.partition" : "fsdp.flat"), 1u);
    }
  }
}

// Two "nodes" of one rank each, one started with --zero 1 and the other with --zero 3: they would
// run different collectives (per-parameter broadcasts against all-gathers); they compare their
// settings first, and both name the one that differs.
TEST_F(ZeroLaunch, RanksWithDifferentZeroStagesAreNamedInsteadOfHanging) {
  const std::string port = std::to_string(free_port());
  auto node = [&](int node_rank, int zero) {
    std::vector<std::string> args{"launch", "--nproc-per-node", "1", "--nnodes", "2", "--node-rank",
                                  std::to_string(node_rank), "--master-port", port, "--timeout", "20", "--"};
    for (const std::string& a : step(zero, path("out.safetensors"))) args.push_back(a);
    return args;
  };
  Background node0(node(0, 1));
  const RunResult r1 = run_dpv(node(1, 3));
  const RunResult r0 = node0.finish(std::chrono::seconds(60));
  EXPECT_EQ(r0.exit_code, 1) << r0.err;
  EXPECT_EQ(r1.exit_code, 1) << r1.err;
  const std::string says = "the ranks' DistributedDataParallel configurations differ: zero is 3 on rank 1 but 1 on rank 0";
  EXPECT_NE(r0.err.find(says), std::string::npos) << r0.err;
  EXPECT_NE(r1.err.find(says), std::string::npos) << r1.err;
  EXPECT_FALSE(exists(path("out.safetensors")));
}

}  // namespace
}  // namespace dpv::testing
