// Hostile inputs from the fault campaign: JSON nested 200,000 deep (a stack overflow in the
// recursive code after the parse), special files as inputs (/dev/zero read until memory ran out, a
// FIFO blocked for good), special files as outputs (replaced by a regular file), long output names
// (the temporary name overflowed NAME_MAX) and durations that overflow ("inf", "1e300").
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "engine/io/atomic_file.h"
#include "engine/io/checked_json.h"
#include "engine/io/input_file.h"
#include "engine/io/safetensors.h"
#include "engine/io/trace_lanes.h"
#include "engine/io/trace_merge.h"
#include "engine/model_spec.h"
#include "engine/process_groups/seconds.h"
#include "tests/support/errors.h"

namespace dpv {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::error_thrown_by;

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// The fault campaign's size: about 400 KB, far past any stack the recursive code could use.
constexpr size_t kHostileDepth = 200000;

std::string safetensors_with_header(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

class HostileFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dpv_hostile_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string fifo(const std::string& name) const {
    const std::string p = path(name);
    EXPECT_EQ(::mkfifo(p.c_str(), 0600), 0);
    return p;
  }
  fs::path dir_;
};

TEST(CheckedJson, DepthUpToTheLimitParsesAndOneMoreIsRefusedNamingSourceAndLimit) {
  EXPECT_TRUE(parse_json(nested(kMaxJsonDepth), "ok.json", 1024).is_array());
  const Error e = error_thrown_by([] { (void)parse_json(nested(kMaxJsonDepth + 1), "deep.json", 1024); });
  EXPECT_EQ(e.error_class(), ErrorClass::ValueError);
  EXPECT_NE(std::string(e.what()).find("deep.json: JSON nested more than 64 levels"), std::string::npos) << e.what();
}

TEST(CheckedJson, BracketsInsideStringsAreTextNotNesting) {
  // Escaped quotes and backslashes must not end the string early, or these brackets would count.
  const std::string text = "[\"" + std::string(100, '[') + "\\\"" + std::string(100, '{') + "\\\\\"]";
  EXPECT_EQ(parse_json(text, "s.json", 4096).size(), 1u);
}

TEST(CheckedJson, TextOverTheSizeLimitIsRefusedBeforeParsing) {
  const std::string msg = error_of([] { (void)parse_json(std::string(2000, ' ') + "1", "big.json", 1024); });
  EXPECT_NE(msg.find("big.json: 2001 bytes of JSON is over the 1024 bytes limit"), std::string::npos) << msg;
}

TEST(CheckedJson, EveryFormatRefusesDeepNestingInsteadOfCrashing) {
  // A model layer, and an unknown key's value (its message used to dump() the value).
  EXPECT_NE(error_of([] { parse_model_spec("{\"layers\": [" + nested(kHostileDepth) + "]}", "m.json"); })
                .find("m.json: JSON nested more than 64"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_model_spec("{\"layers\": [], \"x\": " + nested(kHostileDepth) + "}", "m.json"); })
                .find("nested more than 64"),
            std::string::npos);
  // A safetensors shape and data_offsets.
  for (const char* field : {"shape", "data_offsets"}) {
    const std::string header = std::string("{\"a\": {\"dtype\": \"F32\", \"") + field + "\": " + nested(kHostileDepth) + "}}";
    EXPECT_NE(error_of([&] { parse_safetensors(safetensors_with_header(header, ""), "s.st"); })
                  .find("s.st: the header: JSON nested more than 64"),
              std::string::npos)
        << field;
  }
  // Traces: merged and read for lanes.
  EXPECT_NE(error_of([] { merge_chrome_traces({"{\"traceEvents\": " + nested(kHostileDepth) + "}"}, {"t.json"}); })
                .find("t.json is not a Chrome trace: JSON nested more than 64"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_trace_lanes(nested(kHostileDepth), "t.json"); }).find("nested more than 64"),
            std::string::npos);
}

TEST(CheckedJson, MessagesQuoteALongValueOnlyInPart) {
  // The value used to be dumped whole into the message: a megabyte of "loss" made a megabyte line.
  const std::string msg = error_of([] { parse_model_spec("{\"layers\": [{\"type\": \"relu\"}], \"loss\": [\"" + std::string(1 << 20, 'x') + "\"]}", "m.json"); });
  EXPECT_NE(msg.find("m.json: \"loss\" must be a string, got [\"xxx"), std::string::npos) << msg.substr(0, 200);
  EXPECT_NE(msg.find("... (1048580 characters)"), std::string::npos) << msg.substr(0, 200);
  EXPECT_LT(msg.size(), 300u);
}

TEST_F(HostileFiles, SpecialFilesAreRefusedAsInputsWithoutBlockingOrReading) {
  // A FIFO with no writer: opening it used to wait for a writer forever.
  const std::string pipe = fifo("model.json");
  Error e = error_thrown_by([&] { (void)load_model_spec(pipe); });
  EXPECT_EQ(e.error_class(), ErrorClass::OSError);
  EXPECT_NE(std::string(e.what()).find("is a FIFO (named pipe), not a regular file"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find(pipe), std::string::npos);
  // /dev/zero never ends: it used to be read until memory ran out.
  e = error_thrown_by([] { (void)load_safetensors("/dev/zero"); });
  EXPECT_NE(std::string(e.what()).find("'/dev/zero' is a character device"), std::string::npos) << e.what();
}

TEST_F(HostileFiles, AFileOverItsKindsLimitIsRefusedNamingFileAndLimit) {
  const std::string p = path("big.json");
  std::ofstream(p) << std::string(100, ' ');
  const InputKind tiny{"test file", 64};
  const std::string msg = error_of([&] { (void)read_file(p, tiny); });
  EXPECT_NE(msg.find("'" + p + "' is 100 bytes, over the 64 bytes limit for a test file"), std::string::npos) << msg;
  EXPECT_EQ(read_file(p, InputKind{"test file", 100}).size(), 100u);
}

TEST_F(HostileFiles, AnOutputThatIsNotARegularFileIsRefusedAndKept) {
  const std::string pipe = fifo("out.st");
  const Error e = error_thrown_by([&] { write_file_atomic(pipe, "bytes"); });
  EXPECT_EQ(e.error_class(), ErrorClass::OSError);
  EXPECT_NE(std::string(e.what()).find("is a FIFO (named pipe), not a regular file; outputs are written only to regular files"),
            std::string::npos)
      << e.what();
  struct stat info {};
  ASSERT_EQ(::lstat(pipe.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));  // not replaced by a regular file
  // Through a link to a device: the device is what the write would replace.
  fs::create_symlink("/dev/null", path("null-link"));
  EXPECT_NE(error_of([&] { write_file_atomic(path("null-link"), "x"); }).find("is a character device"), std::string::npos);
  ASSERT_EQ(::stat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
}

TEST_F(HostileFiles, LegalNamesUpToNameMaxAreWritten) {
  for (size_t length : {233, 240, 255}) {
    const std::string p = path(std::string(length, 'n'));
    write_file_atomic(p, "data");
    EXPECT_EQ(read_file(p, kModelSpecInput), "data") << length;
  }
  size_t left = 0;  // no temporary file stays behind
  for (const auto& entry : fs::directory_iterator(dir_)) left += entry.path().filename().string().size() < 233;
  EXPECT_EQ(left, 0u);
}

TEST(Seconds, DurationsOutsideTheRangeOrNotFiniteAreRefusedWithTheRange) {
  for (const char* bad : {"inf", "-inf", "nan", "1e300", "1e10", "1e400", "0", "-1", "", "30s", "0.0001"}) {
    const std::string problem = seconds_problem(bad, kTimeoutSeconds);
    EXPECT_NE(problem.find("must be a finite number of seconds from 0.001 to 604800"), std::string::npos)
        << bad << ": " << problem;
  }
  for (const char* good : {"30", "0.001", "1e3", "604800", "1800.5"}) EXPECT_EQ(seconds_problem(good, kTimeoutSeconds), "") << good;
  EXPECT_DOUBLE_EQ(parse_seconds("1e3", "DPV_TIMEOUT", kTimeoutSeconds), 1000.0);
  const std::string msg = error_of([] { (void)parse_seconds("inf", "DPV_TIMEOUT", kTimeoutSeconds); });
  EXPECT_NE(msg.find("DPV_TIMEOUT='inf': must be a finite number of seconds"), std::string::npos) << msg;
}

}  // namespace
}  // namespace dpv
