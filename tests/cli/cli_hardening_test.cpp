// Bad input from a careless user: out-of-range integers, sizes too large for the machine, outputs
// that are inputs, outputs checked only after the work, and the small things (nan, unknown
// command, file names in messages, Python's error kinds). Each case failed before its fix.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "run_dpv.h"

namespace dpv::testing {
namespace {
namespace fs = std::filesystem;

class CliHardening : public CliTest {
 protected:
  std::string slurp(const std::string& p) const {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::vector<std::string> step_args(const std::string& model, const std::string& batch, const std::string& out) const {
    return {"step", "--model", model, "--batch", batch, "--devices", "cpu:1", "--out", out};
  }
  // An IDX image file of `count` 28x28 images and a matching label file.
  std::pair<std::string, std::string> write_idx(int count) const {
    auto header = [](uint32_t magic, std::vector<uint32_t> dims) {
      std::string s;
      auto put = [&s](uint32_t v) {
        for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((v >> shift) & 0xff));
      };
      put(magic);
      for (uint32_t d : dims) put(d);
      return s;
    };
    const auto n = static_cast<uint32_t>(count);
    return {write_text("images.idx", header(0x803, {n, 28, 28}) + std::string(n * 28 * 28, '\x10')),
            write_text("labels.idx", header(0x801, {n}) + std::string(n, '\1'))};
  }
};

void expect_parse_error(const RunResult& r, const std::vector<std::string>& needles) {
  EXPECT_EQ(r.exit_code, 2) << "stdout: " << r.out << "\nstderr: " << r.err;
  for (const auto& needle : needles) EXPECT_NE(r.err.find(needle), std::string::npos) << "missing '" << needle << "' in: " << r.err;
}

TEST_F(CliHardening, OutOfRangeIntegersAreRefusedNotClamped) {
  // Each ran before: --steps 2^63 was clamped to 2^63-1 (training forever; "nope" stops it here on
  // the old code), --seed -1 became 2^64-1, 010 was octal.
  expect_parse_error(run_dpv({"train", "--preset", "nope", "--steps", "9223372036854775808"}),
                     {"--steps", "9223372036854775808"});
  expect_parse_error(run_dpv({"sample", "--seed", "-1"}), {"--seed", "-1"});
  expect_parse_error(run_dpv({"sample", "--seed", "18446744073709551616"}), {"--seed"});
  expect_parse_error(run_dpv({"train", "--preset", "nope", "--batch", "0x10"}), {"--batch", "0x10"});
  expect_parse_error(run_dpv({"train", "--preset", "nope", "--trace-steps", "99999999999"}), {"--trace-steps"});
  expect_parse_error(run_dpv({"bench", "--models", "nope", "--iters", "4294967297"}), {"--iters"});
  // In range still works, and leading zeros are decimal.
  const RunResult a = run_dpv({"sample", "--seed", "010"}), b = run_dpv({"sample", "--seed", "10"});
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST_F(CliHardening, SizesTooLargeForTheMachineNameTheOptionAndTheBytes) {
  // --batch 2^62 overflowed batch * 32 (undefined behaviour); --samples 3e12 failed as std::bad_alloc.
  expect_error(run_dpv({"train", "--preset", "simple", "--steps", "1", "--batch", "4611686018427387904"}),
               {"--batch 4611686018427387904", "bytes", "memory"});
  expect_error(run_dpv({"train", "--preset", "simple", "--steps", "1", "--samples", "3000000000000"}),
               {"--samples 3000000000000", "bytes", "data set"});
  expect_error(run_dpv({"train", "--preset", "mlp-bn", "--steps", "1", "--batch", "100000000000", "--samples",
                        "100000000000"}),
               {"--batch 100000000000", "bytes"});
  const std::string big = write_text(
      "big.json", R"({"layers": [{"type": "linear", "in_features": 16777216, "out_features": 4096},
                                 {"type": "linear", "in_features": 4096, "out_features": 2}]})");
  expect_error(run_dpv({"train", "--model", big, "--steps", "1"}), {"--model " + big, "bytes", "parameters"});
}

TEST_F(CliHardening, AnOutputThatIsAnInputIsRefusedAndTheInputKept) {
  const std::string model = write_text("m.json", simple_model_json());
  const std::string batch = write_batch("b.safetensors", {8, 10}, DType::Float32);
  const std::string model_bytes = slurp(model), batch_bytes = slurp(batch);
  expect_error(run_dpv(step_args(model, batch, model)), {"--out", "same file as --model"});
  EXPECT_EQ(slurp(model), model_bytes);
  expect_error(run_dpv(step_args(model, batch, dir_.string() + "/./b.safetensors")), {"same file as --batch"});
  // Through a symbolic link: the same file all the same.
  fs::create_symlink(batch, path("link.safetensors"));
  expect_error(run_dpv(step_args(model, batch, path("link.safetensors"))), {"same file as --batch"});
  EXPECT_EQ(slurp(batch), batch_bytes);
  EXPECT_TRUE(fs::is_symlink(path("link.safetensors")));
  // train --trace onto the model file.
  expect_error(run_dpv({"train", "--model", model, "--steps", "1", "--trace", model}), {"--trace", "same file as --model"});
  EXPECT_EQ(slurp(model), model_bytes);
}

TEST_F(CliHardening, AnOutputLinkIsWrittenThroughAsTorchSaveDoes) {
  const std::string model = write_text("m.json", simple_model_json());
  const std::string batch = write_batch("b.safetensors", {8, 10}, DType::Float32);
  fs::create_directories(path("results"));
  fs::create_symlink("results/out.safetensors", path("latest.safetensors"));  // dangling until written
  const RunResult r = run_dpv(step_args(model, batch, path("latest.safetensors")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(path("latest.safetensors")));
  EXPECT_TRUE(fs::is_regular_file(path("results/out.safetensors")));
}

TEST_F(CliHardening, OutputsAndListsAreCheckedBeforeTheWork) {
  // The trace folder: checked before the IDX files are read (and before any step).
  const auto [images, labels] = write_idx(4);
  RunResult r = run_dpv({"train", "--preset", "mnist-mlp", "--steps", "1", "--batch", "2", "--idx-images", images,
                         "--idx-labels", path("missing-labels.idx"), "--trace", path("nodir/t.json")});
  expect_error(r, {"FileNotFoundError", "--trace", "nodir"});
  EXPECT_EQ(r.out, "");
  // bench: nothing measured (no table row) before a bad --json folder, model or device is reported.
  r = run_dpv({"bench", "--models", "simple", "--devices", "cpu:1", "--iters", "1", "--json", path("nodir/b.json")});
  expect_error(r, {"--json", "nodir"});
  EXPECT_EQ(r.out, "");
  r = run_dpv({"bench", "--models", "simple", "resnet9000", "--devices", "cpu:1", "--iters", "1"});
  expect_error(r, {"resnet9000"});
  EXPECT_EQ(r.out, "");
  r = run_dpv({"bench", "--models", "simple", "--devices", "cpu:1", "gpu:7", "--iters", "1"});
  expect_error(r, {"gpu:7"});
  EXPECT_EQ(r.out, "");
  // step --out into a folder that is not there: refused before the model is even read.
  r = run_dpv(step_args(path("missing-model.json"), path("missing-batch.safetensors"), path("nodir/out.safetensors")));
  expect_error(r, {"--out", "nodir"});
}

TEST_F(CliHardening, TraceMergeAndAllreduceBenchCheckBeforeTheWork) {
  // trace merge onto one of its inputs replaced that input.
  const std::string trace = write_text("rank0.json", R"({"traceEvents": []})");
  const std::string before = slurp(trace);
  expect_error(run_dpv({"trace", "merge", trace, trace}), {"same file as IN"});
  EXPECT_EQ(slurp(trace), before);
  expect_error(run_dpv({"trace", "merge", path("nodir/merged.json"), trace}), {"OUT", "nodir"});
  // bench allreduce: sizes and output before joining any job.
  expect_parse_error(run_dpv({"bench", "allreduce", "--max-bytes", "1e30"}), {"--max-bytes", "must be from 4 to 1099511627776"});
  expect_error(run_dpv({"bench", "allreduce", "--max-bytes", "1e12"}), {"--max-bytes", "bytes"});
  expect_error(run_dpv({"bench", "allreduce", "--min-bytes", "4096", "--max-bytes", "1024"}), {"--min-bytes"});
  expect_error(run_dpv({"bench", "allreduce", "--json", path("nodir/a.json")}), {"--json", "nodir"});
  expect_parse_error(run_dpv({"launch", "--nproc-per-node", "2", "--master-port", "70000", "--", "sample"}),
                     {"--master-port"});
}

TEST_F(CliHardening, UnknownCommandIsNamed) {
  const RunResult r = run_dpv({"frobnicate", "--steps", "3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("train"), std::string::npos) << r.err;
}

TEST_F(CliHardening, NanIsPrintedAsPythonPrintsIt) {
  // A learning rate of 1e300 sends the loss to NaN, which printf wrote as "-nan".
  const RunResult r = run_dpv({"train", "--preset", "simple", "--steps", "3", "--lr", "1e300"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("loss nan"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("-nan"), std::string::npos) << r.out;
}

// Starts dpv with stdout on a pipe, reads until `needle` appears (or 20 s pass), then sends SIGINT
// and returns what was read.
std::string read_until_then_interrupt(const std::vector<std::string>& args, const std::string& needle) {
  int fds[2];
  if (::pipe(fds) != 0) return "<pipe failed>";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<std::string> argv_text{dpv_binary()};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (out.find(needle) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    char buf[4096];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) out.append(buf, static_cast<size_t>(n));
    else std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGINT);
  ::waitpid(pid, nullptr, 0);
  ::close(fds[0]);
  return out;
}

TEST_F(CliHardening, TheFirstLineReachesAPipeBeforeCtrlC) {
  // With a billion steps the first progress line is far away; the header was held in the buffer
  // and lost when Ctrl-C ended the run.
  const std::string out = read_until_then_interrupt(
      {"train", "--preset", "simple", "--steps", "1000000000", "--devices", "cpu:1"}, "\n");
  EXPECT_NE(out.find("dpv train: simple"), std::string::npos) << out;
}

TEST_F(CliHardening, IdxErrorsNameTheFile) {
  // 784-pixel images for the 10-feature SimpleModel.
  const auto [images, labels] = write_idx(4);
  expect_error(run_dpv({"train", "--preset", "simple", "--steps", "1", "--batch", "2", "--idx-images", images,
                        "--idx-labels", labels}),
               {images, "784 pixels", "10 features"});
}

TEST_F(CliHardening, FileErrorsUsePythonsKinds) {
  const std::string batch = write_batch("b.safetensors", {8, 10}, DType::Float32);
  const std::string model = write_text("m.json", simple_model_json());
  expect_error(run_dpv(step_args(path("nope.json"), batch, path("out.safetensors"))),
               {"FileNotFoundError: [Errno 2] No such file or directory: '" + path("nope.json") + "'"});
  fs::create_directories(path("folder.safetensors"));
  expect_error(run_dpv(step_args(model, path("folder.safetensors"), path("out.safetensors"))),
               {"IsADirectoryError: [Errno 21] Is a directory: '" + path("folder.safetensors") + "'"});
  expect_error(run_dpv(step_args(model, batch, path("folder.safetensors"))), {"IsADirectoryError", "--out"});
}

}  // namespace
}  // namespace dpv::testing
