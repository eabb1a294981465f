// make_data_for_model says what does not fit in the engine's own terms (a data kind), naming no
// command-line flag: the front end that chose the kind adds its own (`dpv train --data`).
#include <gtest/gtest.h>

#include "engine/model_data.h"
#include "engine/model_spec.h"
#include "tests/support/errors.h"

namespace dpv {
namespace {

TEST(ModelDataMessages, KindThatDoesNotFitIsAValueErrorWithoutAFlag) {
  const ModelSpec mlp = preset_model("mnist-mlp");
  EXPECT_EQ(testing::error_of([&] { make_data_for_model(mlp, 8, 1, "spiral"); }),
            "'spiral' data has 2 features but the model takes 784");
  const Error unknown = testing::error_thrown_by([&] { make_data_for_model(mlp, 8, 1, "moons"); });
  EXPECT_EQ(unknown.error_class(), ErrorClass::ValueError);
  EXPECT_STREQ(unknown.what(), "unknown data kind 'moons' (auto, spiral, blobs)");
}

}  // namespace
}  // namespace dpv
