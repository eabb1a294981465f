// dpv's inputs and outputs at their bounds, as a user meets them (cli_faults_test.cpp has arrays
// nested 200,000 deep, /dev/zero and FIFOs as step's inputs and outputs, the ring bench's sizes):
// objects nested 200,000 deep, every input kind one byte over its limit (sparse files), trace
// merge's inputs and output as a folder, a device or a FIFO, a 255-character merged trace name,
// and the durations -1, '' and DPV_TIMEOUT=inf.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/io/input_file.h"
#include "run_dpv.h"

namespace dpv::testing {
namespace {
namespace fs = std::filesystem;

constexpr size_t kHostileDepth = 200000;

std::string nested_objects(size_t depth) {
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += "{\"a\":";
  return s + "1" + std::string(depth, '}');
}

// Environment variables for the dpv runs of one scope; each is put back as it was when it ends.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::vector<std::pair<std::string, std::string>>& vars) {
    for (const auto& [name, value] : vars) {
      const char* before = std::getenv(name.c_str());
      saved_.emplace_back(name, before ? std::optional<std::string>(before) : std::nullopt);
      ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, before] : saved_) {
      if (before) ::setenv(name.c_str(), before->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

class CliBounds : public CliTest {
 protected:
  std::string sparse(const std::string& name, const InputKind& kind) const {
    const std::string p = write_text(name, "");
    EXPECT_EQ(::truncate(p.c_str(), static_cast<off_t>(kind.max_bytes + 1)), 0) << p;
    return p;
  }
  static std::string over(const std::string& p, const InputKind& kind) {
    return "'" + p + "' is " + std::to_string(kind.max_bytes + 1) + " bytes, over the " + describe_bytes(kind.max_bytes) +
           " limit for a " + kind.name;
  }
  std::vector<std::string> step_args(const std::string& model, const std::string& batch, const std::string& out) const {
    return {"step", "--model", model, "--batch", batch, "--devices", "cpu:1", "--out", out};
  }
  std::string trace() const { return write_text("rank0.json", R"({"traceEvents": [], "otherData": {"rank": 0}})"); }
};

TEST_F(CliBounds, ObjectsNested200000DeepAreRefusedNamingTheFileAndTheLimit) {
  const std::string model = write_text("deep.json", "{\"layers\": [" + nested_objects(kHostileDepth) + "]}");
  const std::string batch = write_batch("b.safetensors", {8, 10}, DType::Float32);
  expect_error(run_dpv(step_args(model, batch, path("o.st"))), {"deep.json", "nested more than 64 levels"}, path("o.st"));
  const std::string trace = write_text("deep-trace.json", "{\"traceEvents\": [" + nested_objects(kHostileDepth) + "]}");
  expect_error(run_dpv({"trace", "merge", path("merged.json"), trace}), {"deep-trace.json", "nested more than 64 levels"},
               path("merged.json"));
}

TEST_F(CliBounds, EveryInputKindOneByteOverItsLimitIsRefusedNamingTheLimit) {
  const std::string model = write_text("m.json", simple_model_json());
  const std::string batch = write_batch("b.safetensors", {8, 10}, DType::Float32);
  const std::string big_model = sparse("big.json", kModelSpecInput);
  expect_error(run_dpv(step_args(big_model, batch, path("o.st"))), {over(big_model, kModelSpecInput)}, path("o.st"));
  const std::string big_batch = sparse("big.safetensors", kSafetensorsInput);
  expect_error(run_dpv(step_args(model, big_batch, path("o.st"))), {over(big_batch, kSafetensorsInput)}, path("o.st"));
  const std::string big_trace = sparse("big-trace.json", kTraceInput);
  expect_error(run_dpv({"trace", "merge", path("merged.json"), big_trace}), {over(big_trace, kTraceInput)},
               path("merged.json"));
  const std::string images = sparse("images.idx", kIdxInput), labels = sparse("labels.idx", kIdxInput);
  expect_error(run_dpv({"train", "--preset", "mnist-mlp", "--steps", "1", "--idx-images", images, "--idx-labels", labels}),
               {over(images, kIdxInput)});
}

TEST_F(CliBounds, TraceMergeInputsThatAreNotRegularFilesAreRefusedAtOnce) {
  fs::create_directories(path("folder"));
  const RunResult folder = run_dpv({"trace", "merge", path("merged.json"), path("folder")});
  EXPECT_EQ(folder.exit_code, 2) << folder.err;
  EXPECT_NE(folder.err.find("is actually a directory"), std::string::npos) << folder.err;
  expect_error(run_dpv({"trace", "merge", path("merged.json"), "/dev/zero"}),
               {"'/dev/zero' is a character device, not a regular file; a trace is read only from a regular file"},
               path("merged.json"));
  const std::string pipe = path("pipe.json");
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);  // no writer: a read would block for good
  expect_error(run_dpv({"trace", "merge", path("merged.json"), pipe}), {"pipe.json' is a FIFO (named pipe)"},
               path("merged.json"));
}

TEST_F(CliBounds, AnOutputThatIsNotARegularFileIsRefusedAndLeftUnchanged) {
  const std::string in = trace();
  expect_error(run_dpv({"trace", "merge", "/dev/null", in}), {"OUT: '/dev/null' is a character device"});
  struct stat info {};
  ASSERT_EQ(::stat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
  const std::string pipe = path("out.json");
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  expect_error(run_dpv({"trace", "merge", pipe, in}), {"OUT: '" + pipe + "' is a FIFO (named pipe)"});
  ASSERT_EQ(::lstat(pipe.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));
  // A folder, for trace merge and for step: refused, and nothing written into it.
  fs::create_directories(path("out-folder"));
  expect_error(run_dpv({"trace", "merge", path("out-folder"), in}), {"IsADirectoryError", "OUT"});
  const std::string model = write_text("m.json", simple_model_json());
  const std::string batch = write_batch("b.safetensors", {8, 10}, DType::Float32);
  expect_error(run_dpv(step_args(model, batch, path("out-folder"))), {"IsADirectoryError", "--out"});
  EXPECT_TRUE(fs::is_directory(path("out-folder")));
  EXPECT_TRUE(fs::is_empty(path("out-folder")));
}

TEST_F(CliBounds, AMergedTraceNamed255CharactersIsWritten) {
  const std::string out = path(std::string(250, 't') + ".json");
  const RunResult r = run_dpv({"trace", "merge", out, trace()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(out));
  size_t files = 0;  // no temporary file left beside it
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 2u);
}

TEST_F(CliBounds, TimeoutsThatAreNegativeOrEmptyAreFlagErrorsWithTheRange) {
  for (const char* v : {"-1", ""}) {
    const RunResult r = run_dpv({"launch", "--nproc-per-node", "2", "--timeout", v, "--", "bench", "allreduce"});
    EXPECT_EQ(r.exit_code, 2) << v << ": " << r.err;
    EXPECT_NE(r.err.find("--timeout: must be a finite number of seconds from 0.001 to 604800, got " +
                         (std::string(v).empty() ? std::string("''") : std::string(v))),
              std::string::npos)
        << r.err;
  }
}

TEST_F(CliBounds, ARankGivenDpvTimeoutInfSaysWhatIsWrongBeforeJoining) {
  for (const char* v : {"inf", "nan", ""}) {
    const ScopedEnv env({{"DPV_TIMEOUT", v}, {"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"},
                         {"LOCAL_WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29999"}});
    expect_error(run_dpv({"bench", "allreduce"}),
                 {"ValueError: DPV_TIMEOUT='" + std::string(v) + "': must be a finite number of seconds from 0.001 to 604800"});
  }
}

}  // namespace
}  // namespace dpv::testing
