// The process-group backend as a value: its names, and the errors for a name that is none.
#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "engine/process_groups/multiprocess/init_process_group.h"
#include "engine/process_groups/multiprocess/process_group_backend.h"
#include "engine/error.h"
#include "tests/support/errors.h"

namespace dpv::dist {
namespace {

TEST(ProcessGroupBackend, NamesRoundTrip) {
  EXPECT_EQ(name(ProcessGroupBackend::Gloo), "gloo");
  EXPECT_EQ(name(ProcessGroupBackend::Nccl), "nccl");
  EXPECT_EQ(process_group_backend_names(), (std::vector<std::string>{"gloo", "nccl"}));
  for (const std::string& text : process_group_backend_names()) EXPECT_EQ(name(parse_process_group_backend(text)), text);
  EXPECT_EQ(parse_process_group_backend("nccl"), ProcessGroupBackend::Nccl);
}

TEST(ProcessGroupBackend, UnknownNameIsAValueErrorThatListsTheBackends) {
  const Error e = testing::error_thrown_by([] { parse_process_group_backend("NCCL"); });
  EXPECT_EQ(e.error_class(), ErrorClass::ValueError);
  EXPECT_STREQ(e.what(), "'NCCL' is not a backend: use gloo (CPU ranks) or nccl (GPU ranks)");
}

TEST(ProcessGroupBackend, EnvironmentVariableNamedInTheError) {
  const EnvLookup lookup = [](const std::string& key) -> std::optional<std::string> {
    if (key == "DPV_BACKEND") return "mpi";
    return std::nullopt;
  };
  const Error e = testing::error_thrown_by([&] { read_dist_options(lookup); });
  EXPECT_EQ(e.error_class(), ErrorClass::ValueError);
  EXPECT_STREQ(e.what(), "DPV_BACKEND='mpi' is not a backend: use gloo (CPU ranks) or nccl (GPU ranks)");
  const EnvLookup none = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  EXPECT_EQ(read_dist_options(none).backend, ProcessGroupBackend::Gloo);
}

}  // namespace
}  // namespace dpv::dist
