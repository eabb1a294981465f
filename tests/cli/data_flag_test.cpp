// `dpv train --data`: the engine names the data kind that does not fit; the CLI names its flag.
#include "run_dpv.h"

namespace dpv::testing {
namespace {

class DataFlag : public CliTest {};

TEST_F(DataFlag, KindThatDoesNotFitTheModelNamesTheFlag) {
  auto r = run_dpv({"train", "--preset", "mnist-mlp", "--devices", "cpu:1", "--steps", "1", "--batch", "2",
                    "--samples", "8", "--data", "spiral"});
  expect_error(r, {"ValueError: --data: 'spiral' data has 2 features but the model takes 784"});
  r = run_dpv({"train", "--preset", "mnist-mlp", "--devices", "cpu:1", "--steps", "1", "--batch", "2",
               "--samples", "8", "--data", "moons"});
  expect_error(r, {"ValueError: --data: unknown data kind 'moons' (auto, spiral, blobs)"});
}

}  // namespace
}  // namespace dpv::testing
