#include "run_dpv.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "engine/io/safetensors.h"

extern char** environ;

namespace dpv::testing {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int RunResult::err_lines() const {
  int n = 0;
  for (char c : err) n += c == '\n';
  if (!err.empty() && err.back() != '\n') ++n;
  return n;
}

std::string dpv_binary() { return std::string(DPV_BINARY_DIR) + "/cli/dpv"; }
std::string fixtures_dir() { return DPV_TEST_DATA_DIR; }

RunResult run_dpv(const std::vector<std::string>& args) {
  static int counter = 0;
  const auto base = std::filesystem::temp_directory_path() /
                    ("dpv_cli_run_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
  const std::string out_path = base.string() + ".out", err_path = base.string() + ".err";

  std::vector<std::string> argv_strings{dpv_binary()};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  RunResult r;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    r.err = "posix_spawn failed for " + argv_strings[0];
    return r;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return r;
}

void CliTest::SetUp() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  dir_ = std::filesystem::temp_directory_path() /
         ("dpv_cli_" + std::to_string(getpid()) + "_" + info->test_suite_name() + "_" + info->name());
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  ASSERT_TRUE(std::filesystem::exists(dpv_binary())) << "build the dpv target first: " << dpv_binary();
}

void CliTest::TearDown() { std::filesystem::remove_all(dir_); }

std::string CliTest::write_text(const std::string& name, const std::string& text) const {
  std::ofstream(path(name), std::ios::binary) << text;
  return path(name);
}

std::string CliTest::write_tensors(const std::string& name, const TensorMap& tensors) const {
  save_safetensors(path(name), tensors);
  return path(name);
}

std::string CliTest::write_batch(const std::string& name, const Shape& shape, DType dtype, int classes) const {
  const int64_t n = shape_numel(shape);
  std::vector<double> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = std::sin(0.7 * static_cast<double>(i)) * 2.0 + 0.1 * (i % 5);
  const int64_t rows = shape.empty() ? 0 : shape[0];
  std::vector<int64_t> y(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) y[static_cast<size_t>(i)] = i % classes;
  TensorMap batch;
  batch.set("input", Tensor::from_doubles(shape, dtype, x));
  batch.set("target", Tensor::from_int64({rows}, y));
  return write_tensors(name, batch);
}

void CliTest::expect_error(const RunResult& r, const std::vector<std::string>& needles, const std::string& out_file) const {
  EXPECT_EQ(r.exit_code, 1) << "stdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_EQ(r.err_lines(), 1) << "expected exactly one line on stderr, got:\n" << r.err;
  EXPECT_EQ(r.err.rfind("dpv: error: ", 0), 0u) << r.err;
  for (const auto& needle : needles) {
    EXPECT_NE(r.err.find(needle), std::string::npos) << "missing '" << needle << "' in: " << r.err;
  }
  if (!out_file.empty()) {
    EXPECT_FALSE(exists(out_file)) << "a failed run left " << out_file << " behind";
  }
}

std::string simple_model_json(const std::string& dtype) {
  return R"({"layers": [{"type": "linear", "in_features": 10, "out_features": 2}], "loss": "cross_entropy", "dtype": ")" +
         dtype + "\"}";
}

std::string bn_mlp_json() {
  return R"({"layers": [
    {"type": "linear", "in_features": 2, "out_features": 16}, {"type": "batchnorm1d", "num_features": 16},
    {"type": "relu"},
    {"type": "linear", "in_features": 16, "out_features": 16}, {"type": "batchnorm1d", "num_features": 16},
    {"type": "relu"},
    {"type": "linear", "in_features": 16, "out_features": 3}], "loss": "cross_entropy", "dtype": "float32"})";
}

}  // namespace dpv::testing
