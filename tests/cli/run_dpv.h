#pragma once
// Runs the built `dpv` binary as a child process and captures its exit status, stdout and stderr,
// plus helpers that write model, batch and state files into a per-test scratch folder.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/tensor.h"
#include "engine/tensor_map.h"

namespace dpv::testing {

struct RunResult {
  int exit_code = -1;  // the child's exit status; -1 if it did not exit normally (crash, signal)
  std::string out, err;
  // stderr lines ("" counts as zero lines)
  int err_lines() const;
};

std::string dpv_binary();
RunResult run_dpv(const std::vector<std::string>& args);

// A fresh folder per test, removed afterwards.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write_text(const std::string& name, const std::string& text) const;
  std::string write_tensors(const std::string& name, const TensorMap& tensors) const;
  // A batch file: input [shape] of dtype filled with a deterministic pattern, int64 targets in [0, classes).
  std::string write_batch(const std::string& name, const Shape& shape, DType dtype, int classes = 2) const;
  static bool exists(const std::string& p) { return std::filesystem::exists(p); }
  // Expects a failed run: exit status 1, exactly one stderr line "dpv: error: ..." containing every
  // needle, and `out_file` (when given) absent.
  void expect_error(const RunResult& r, const std::vector<std::string>& needles, const std::string& out_file = "") const;

  std::filesystem::path dir_;
};

// The seed's SimpleModel, nn.Linear(10, 2), as a model spec; and the 2-16-BN-ReLU-16-BN-ReLU-3 MLP.
std::string simple_model_json(const std::string& dtype = "float32");
std::string bn_mlp_json();
std::string fixtures_dir();

}  // namespace dpv::testing
