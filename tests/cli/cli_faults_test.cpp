// The fault campaign against dpv, as a user would meet it: JSON nested 200,000 deep (a segmentation
// fault), special files as inputs (/dev/zero read until memory ran out, a FIFO hung for good) or as
// outputs (replaced by a regular file), long output names ("File name too long"), durations that
// overflowed ("--timeout inf") and a benchmark size that ended in an abort (exit 134).
#include <sys/stat.h>

#include <string>

#include "run_dpv.h"

namespace dpv::testing {
namespace {

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }
constexpr size_t kHostileDepth = 200000;

class CliFaults : public CliTest {
 protected:
  std::vector<std::string> step_args(const std::string& model, const std::string& out) const {
    return {"step", "--model", model, "--batch", write_batch("b.safetensors", {8, 10}, DType::Float32),
            "--devices", "cpu:1", "--out", out};
  }
  std::string make_fifo(const std::string& name) const {
    const std::string p = path(name);
    EXPECT_EQ(::mkfifo(p.c_str(), 0600), 0);
    return p;
  }
  static bool is_fifo(const std::string& p) {
    struct stat info {};
    return ::lstat(p.c_str(), &info) == 0 && S_ISFIFO(info.st_mode);
  }
};

TEST_F(CliFaults, DeeplyNestedJsonIsRefusedNamingTheFileAndTheLimit) {
  const std::string layer = write_text("layer.json", "{\"layers\": [" + nested(kHostileDepth) + "]}");
  expect_error(run_dpv(step_args(layer, path("o.st"))), {"layer.json", "nested more than 64 levels"}, path("o.st"));
  const std::string unknown =
      write_text("unknown.json", "{\"layers\": [{\"type\": \"relu\"}], \"extra\": " + nested(kHostileDepth) + "}");
  expect_error(run_dpv(step_args(unknown, path("o.st"))), {"unknown.json", "nested more than 64 levels"}, path("o.st"));
  const std::string trace = write_text("deep.json", "{\"traceEvents\": " + nested(kHostileDepth) + "}");
  expect_error(run_dpv({"trace", "merge", path("merged.json"), trace}), {"deep.json", "nested more than 64 levels"},
               path("merged.json"));
}

TEST_F(CliFaults, SpecialFilesAsInputsAreRefusedAtOnce) {
  const std::string model = write_text("m.json", simple_model_json());
  expect_error(run_dpv(step_args("/dev/zero", path("o.st"))), {"'/dev/zero' is a character device, not a regular file"},
               path("o.st"));
  // No writer ever opens this FIFO: reading it used to block for good.
  const std::string pipe = make_fifo("model.json");
  expect_error(run_dpv(step_args(pipe, path("o.st"))), {"model.json' is a FIFO (named pipe), not a regular file"},
               path("o.st"));
  std::vector<std::string> args = step_args(model, path("o.st"));
  args.insert(args.end(), {"--state", make_fifo("state.st")});
  expect_error(run_dpv(args), {"state.st' is a FIFO"}, path("o.st"));
}

TEST_F(CliFaults, AnOutputThatIsNotARegularFileIsRefusedAndLeftAlone) {
  const std::string model = write_text("m.json", simple_model_json());
  const std::string pipe = make_fifo("out.st");
  expect_error(run_dpv(step_args(model, pipe)), {"--out", "is a FIFO (named pipe), not a regular file"});
  EXPECT_TRUE(is_fifo(pipe));
  expect_error(run_dpv(step_args(model, "/dev/null")), {"--out", "'/dev/null' is a character device"});
  struct stat info {};
  ASSERT_EQ(::stat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
}

TEST_F(CliFaults, OutputNamesUpToNameMaxAreWritten) {
  const std::string model = write_text("m.json", simple_model_json());
  for (size_t length : {233, 255}) {
    const std::string out = path(std::string(length - 3, 'o') + ".st");
    const RunResult r = run_dpv(step_args(model, out));
    EXPECT_EQ(r.exit_code, 0) << length << ": " << r.err;
    EXPECT_TRUE(exists(out)) << length;
  }
}

TEST_F(CliFaults, DurationsOutOfRangeAreRefusedWithTheRange) {
  for (const char* v : {"inf", "1e300", "1e10", "nan"}) {
    const RunResult r = run_dpv({"launch", "--nproc-per-node", "2", "--timeout", v, "--", "bench", "allreduce"});
    EXPECT_EQ(r.exit_code, 2) << v << ": " << r.err;
    EXPECT_NE(r.err.find("--timeout"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("must be a finite number of seconds from 0.001 to 604800"), std::string::npos) << r.err;
  }
  const RunResult r = run_dpv({"bench", "allreduce", "--seconds-per-size", "inf"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("from 0 to 3600"), std::string::npos) << r.err;
}

TEST_F(CliFaults, RingBenchSizesAreBoundedBeforeAnyAllocation) {
  const RunResult huge = run_dpv({"bench", "ring", "--max-bytes", "1e30"});
  EXPECT_EQ(huge.exit_code, 2) << huge.err;
  EXPECT_NE(huge.err.find("--max-bytes"), std::string::npos) << huge.err;
  EXPECT_NE(huge.err.find("must be from 4 to 1099511627776, got 1e30"), std::string::npos) << huge.err;
  // Within the flag's range but beyond the machine: the memory check, exit 1, not an abort (134).
  expect_error(run_dpv({"bench", "ring", "--ranks", "64", "--min-bytes", "1e12", "--max-bytes", "1e12"}),
               {"--max-bytes", "bytes"});
}

}  // namespace
}  // namespace dpv::testing
