// Every kind of input file against its bounds, through the loader that reads it: a file one byte
// over its kind's limit (a sparse file: the size is there, no byte is written), a directory, an
// endless device and a FIFO with no writer, each refused at once naming the file; and JSON nested
// 200,000 deep in the places hostile_inputs_test.cpp does not reach (objects instead of arrays, a
// safetensors header's __metadata__).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/io/idx.h"
#include "engine/io/input_file.h"
#include "engine/io/safetensors.h"
#include "engine/io/trace_lanes.h"
#include "engine/io/trace_merge.h"
#include "engine/model_spec.h"
#include "tests/support/errors.h"

namespace dpv {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::error_thrown_by;

constexpr size_t kHostileDepth = 200000;

std::string nested_objects(size_t depth) {
  std::string s;
  s.reserve(depth * 6 + 1);
  for (size_t i = 0; i < depth; ++i) s += "{\"a\":";
  return s + "1" + std::string(depth, '}');
}

// One loader of the engine's: what it is called, how it reads a path, and its kind's limit.
struct Loader {
  const char* name;
  InputKind kind;
  std::function<void(const std::string&)> load;
};

std::vector<Loader> loaders(const std::string& merge_out) {
  return {
      {"model spec", kModelSpecInput, [](const std::string& p) { (void)load_model_spec(p); }},
      {"safetensors", kSafetensorsInput, [](const std::string& p) { (void)load_safetensors(p); }},
      {"IDX images", kIdxInput, [](const std::string& p) { (void)load_idx_images(p); }},
      {"IDX labels", kIdxInput, [](const std::string& p) { (void)load_idx_labels(p); }},
      {"trace merge", kTraceInput, [merge_out](const std::string& p) { merge_trace_files(merge_out, {p}); }},
      {"timeline trace", kTraceInput, [](const std::string& p) { (void)read_trace_lanes(read_file(p, kTraceInput), p); }},
  };
}

class InputBounds : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dpv_bounds_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(InputBounds, EveryKindOneByteOverItsLimitIsRefusedNamingTheFileAndTheLimit) {
  for (const Loader& l : loaders(path("merged.json"))) {
    const std::string p = path(std::string("sparse-") + l.kind.name);
    { std::ofstream create(p); }
    ASSERT_EQ(::truncate(p.c_str(), static_cast<off_t>(l.kind.max_bytes + 1)), 0) << p;
    const Error e = error_thrown_by([&] { l.load(p); });
    EXPECT_EQ(e.error_class(), ErrorClass::ValueError) << l.name;
    const std::string expected = "'" + p + "' is " + std::to_string(l.kind.max_bytes + 1) + " bytes, over the " +
                                 describe_bytes(l.kind.max_bytes) + " limit for a " + l.kind.name;
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << l.name << ": " << e.what();
    fs::remove(p);
  }
  EXPECT_FALSE(fs::exists(path("merged.json")));  // nothing written for a refused input
}

TEST_F(InputBounds, ADirectoryADeviceAndAFifoAreRefusedAtOnceByEveryLoader) {
  const std::string folder = path("folder");
  fs::create_directories(folder);
  const std::string pipe = path("pipe");
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  for (const Loader& l : loaders(path("merged.json"))) {
    Error e = error_thrown_by([&] { l.load(folder); });
    EXPECT_EQ(e.error_class(), ErrorClass::IsADirectoryError) << l.name << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(folder), std::string::npos) << l.name << ": " << e.what();
    EXPECT_NE(error_of([&] { l.load("/dev/zero"); }).find("'/dev/zero' is a character device, not a regular file"),
              std::string::npos)
        << l.name;
    // No writer ever opens it: a read would block for good, so this returning at all is the test.
    EXPECT_NE(error_of([&] { l.load(pipe); }).find("'" + pipe + "' is a FIFO (named pipe), not a regular file"),
              std::string::npos)
        << l.name;
  }
  EXPECT_FALSE(fs::exists(path("merged.json")));
}

TEST(InputDepth, ObjectsNested200000DeepAreRefusedNamingTheSourceAndTheLimit) {
  const std::string deep = nested_objects(kHostileDepth);
  const std::string limit = "JSON nested more than 64 levels";
  EXPECT_NE(error_of([&] { parse_model_spec("{\"layers\": [" + deep + "]}", "m.json"); }).find("m.json: " + limit),
            std::string::npos);
  EXPECT_NE(error_of([&] { merge_chrome_traces({"{\"traceEvents\": [" + deep + "]}"}, {"t.json"}); })
                .find("t.json is not a Chrome trace: " + limit),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_trace_lanes("{\"traceEvents\": [{\"args\": " + deep + "}]}", "t.json"); })
                .find("t.json is not a Chrome trace: " + limit),
            std::string::npos);
}

TEST(InputDepth, ASafetensorsMetadataNested200000DeepIsRefused) {
  for (const std::string& deep : {std::string(kHostileDepth, '[') + std::string(kHostileDepth, ']'),
                                  nested_objects(kHostileDepth)}) {
    const std::string header = "{\"__metadata__\": {\"k\": " + deep + "}}";
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    const std::string msg = error_of([&] { (void)parse_safetensors(file + header, "s.st"); });
    EXPECT_NE(msg.find("s.st: the header: JSON nested more than 64 levels"), std::string::npos) << msg.substr(0, 200);
  }
}

TEST(TraceMergeInput, FieldsOfAnotherTypeAreSkippedAndARankPastIntIsRefused) {
  // A number as "ph" or "name" escaped as the JSON library's type error, not a dpv::Error.
  const std::string merged =
      merge_chrome_traces({R"({"traceEvents": [{"name": 5, "ph": 1, "args": []}, 7, {"ph": "M", "name": "process_name", "args": {"name": 9}}]})"},
                          {"odd.json"});
  EXPECT_NE(merged.find("\"rank 0\""), std::string::npos) << merged;
  // 99999999999 became rank 1215752191 (wrapped into an int).
  for (const char* rank : {"99999999999", "-1", "18446744073709551615"}) {
    const std::string msg = error_of([&] {
      (void)merge_chrome_traces({std::string(R"({"traceEvents": [], "otherData": {"rank": )") + rank + "}}"}, {"r.json"});
    });
    EXPECT_NE(msg.find(std::string("r.json: \"otherData\" gives rank ") + rank + ", not a rank (0 to 2147483647)"),
              std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace dpv
