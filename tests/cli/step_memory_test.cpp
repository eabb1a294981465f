// `dpv step` and `dpv step --ddp` check the memory a step asks for before allocating it, as
// `dpv train` does (cli/size_checks.h; issue 27, R6): a model whose first layer is 10^6 x 65536
// (within the model spec's per-layer limit of 2^36 elements, but 262 GB of float32 weights, five
// times that with gradients, momentum and replicas) fails at once with the memory message, not
// std::bad_alloc (an abort) or the machine running out of memory.
#include <string>

#include "tests/cli/run_dpv.h"

namespace dpv::testing {
namespace {

class StepMemory : public CliTest {};

constexpr const char* kHugeLayer =
    R"({"layers": [{"type": "linear", "in_features": 1000000, "out_features": 65536},
                   {"type": "linear", "in_features": 65536, "out_features": 2}], "loss": "cross_entropy"})";

std::vector<std::string> step_args(const std::string& model, const std::string& batch, const std::string& out,
                                   bool ddp) {
  std::vector<std::string> args{"step", "--model", model, "--batch", batch, "--devices", "cpu:2", "--out", out};
  if (ddp) args.push_back("--ddp");
  return args;
}

TEST_F(StepMemory, AHugeLayerIsRefusedBeforeAnyAllocation) {
  const std::string model = write_text("huge.json", kHugeLayer);
  const std::string batch = write_batch("b.safetensors", {2, 4}, DType::Float32);
  for (bool ddp : {false, true}) {
    SCOPED_TRACE(ddp ? "--ddp" : "DataParallel");
    const std::string out = path(ddp ? "ddp.safetensors" : "dp.safetensors");
    expect_error(run_dpv(step_args(model, batch, out, ddp)),
                 {"--model " + model, "asks for", "bytes", "parameters", "machine's memory", "use a smaller size"},
                 out);
  }
}

TEST_F(StepMemory, AModelThatFitsStillSteps) {
  // The check must not refuse what fits: the same command with a small layer runs.
  const std::string model = write_text("m.json", simple_model_json());
  const std::string batch = write_batch("b.safetensors", {4, 10}, DType::Float32);
  for (bool ddp : {false, true}) {
    const std::string out = path(ddp ? "ddp.safetensors" : "dp.safetensors");
    const RunResult r = run_dpv(step_args(model, batch, out, ddp));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(exists(out));
  }
}

}  // namespace
}  // namespace dpv::testing
