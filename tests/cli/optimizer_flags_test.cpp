// The optimizer flags of `dpv step` (DP and --ddp) and `dpv train`: --optimizer picks SGD, Adam or
// AdamW, PyTorch's defaults apply where a flag is not given, and a flag the chosen optimizer does
// not take is a command-line error (exit 2) that names it, with no output file written.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/io/safetensors.h"
#include "run_dpv.h"

using namespace dpv;
using namespace dpv::testing;

namespace {

class OptimizerFlags : public CliTest {
 protected:
  RunResult step(const std::vector<std::string>& extra, const std::string& out_name = "out.safetensors") {
    std::vector<std::string> args = {"step", "--model", write_text("model.json", bn_mlp_json()), "--batch",
                                      write_batch("batch.safetensors", {12, 2}, DType::Float32, 3), "--devices",
                                      "cpu:2", "--steps", "2", "--out", path(out_name)};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_dpv(args);
  }
  std::vector<double> weight(const std::string& out_name) {
    return load_safetensors(path(out_name)).at("state/0.weight").to_doubles();
  }
};

}  // namespace

TEST_F(OptimizerFlags, EachOptimizerStepsDifferently) {
  ASSERT_EQ(step({}, "sgd.safetensors").exit_code, 0);
  const RunResult adam = step({"--optimizer", "adam", "--lr", "0.01"}, "adam.safetensors");
  ASSERT_EQ(adam.exit_code, 0) << adam.err;
  const RunResult adamw = step({"--optimizer", "adamw", "--lr", "0.01", "--weight-decay", "0.5"}, "adamw.safetensors");
  ASSERT_EQ(adamw.exit_code, 0) << adamw.err;
  EXPECT_NE(weight("sgd.safetensors"), weight("adam.safetensors"));
  EXPECT_NE(weight("adam.safetensors"), weight("adamw.safetensors"));
}

TEST_F(OptimizerFlags, AdamTakesPyTorchsDefaultsWhereNoFlagIsGiven) {
  // Adam's lr defaults to 1e-3 (PyTorch's), not SGD's 0.01; AdamW's weight decay to 1e-2.
  ASSERT_EQ(step({"--optimizer", "adam"}, "default.safetensors").exit_code, 0);
  ASSERT_EQ(step({"--optimizer", "adam", "--lr", "0.001", "--betas", "0.9,0.999", "--eps", "1e-8"}, "explicit.safetensors")
                .exit_code,
            0);
  EXPECT_EQ(weight("default.safetensors"), weight("explicit.safetensors"));
  ASSERT_EQ(step({"--optimizer", "adamw"}, "w_default.safetensors").exit_code, 0);
  ASSERT_EQ(step({"--optimizer", "adamw", "--weight-decay", "0.01"}, "w_explicit.safetensors").exit_code, 0);
  EXPECT_EQ(weight("w_default.safetensors"), weight("w_explicit.safetensors"));
}

TEST_F(OptimizerFlags, DdpStepsWithAdamToo) {
  const RunResult r = step({"--ddp", "--optimizer", "adamw", "--lr", "0.01"}, "ddp.safetensors");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(exists(path("ddp.safetensors")));
}

TEST_F(OptimizerFlags, AFlagTheOptimizerDoesNotTakeIsRefused) {
  struct Bad {
    std::vector<std::string> flags;
    std::string needle;
  };
  const std::vector<Bad> cases = {
      {{"--optimizer", "adam", "--momentum", "0.9"}, "--momentum"},
      {{"--betas", "0.9,0.99"}, "--betas"},
      {{"--eps", "1e-6"}, "--eps"},
      {{"--optimizer", "adam", "--betas", "1.0,0.99"}, "Invalid beta parameter at index 0"},
      {{"--optimizer", "adam", "--betas", "0.9"}, "B1,B2"},
      {{"--optimizer", "adam", "--betas", "0.9,x"}, "B1,B2"},
      {{"--optimizer", "lamb"}, "lamb"},
  };
  for (const Bad& c : cases) {
    const RunResult r = step(c.flags);
    EXPECT_EQ(r.exit_code, 2) << c.needle << ": " << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
    EXPECT_FALSE(exists(path("out.safetensors"))) << c.needle;
  }
}

TEST_F(OptimizerFlags, TrainSaysWhichOptimizerRuns) {
  const RunResult r = run_dpv({"train", "--preset", "simple", "--steps", "2", "--optimizer", "adamw"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("AdamW lr 0.001"), std::string::npos) << r.out;
}
