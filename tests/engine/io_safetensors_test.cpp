// safetensors reading and writing, atomic file writes, and every malformed-file case the reader rejects.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/input_file.h"
#include "tests/support/errors.h"
#include "engine/io/safetensors.h"

namespace fs = std::filesystem;
using dpv::DType;
using dpv::Tensor;
using dpv::TensorMap;

namespace {

using dpv::testing::error_of;

// A fresh empty folder per test, removed afterwards.
class TempFolder {
 public:
  TempFolder() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("dpv-io-test-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  fs::path path_;
};

// A safetensors byte string from a header text and a data section, as any writer could produce.
std::string raw_file(const std::string& header, const std::string& data) {
  const uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}

TensorMap sample_tensors() {
  TensorMap m;
  m.set("0.weight", Tensor::from_doubles({2, 3}, DType::Float32, {1.5, -2, 3.25, 4, 5, 6}));
  m.set("0.bias", Tensor::from_doubles({2}, DType::Float32, {0.125, -0.5}));
  m.set("1.running_var", Tensor::from_doubles({3}, DType::Float64, {1e-300, 2.0 / 3.0, 7}));
  m.set("1.num_batches_tracked", Tensor::from_int64({}, {42}));
  m.set("target", Tensor::from_int64({4}, {0, 1, -7, int64_t{1} << 60}));
  m.set("empty", Tensor::from_doubles({0, 5}, DType::Float32, {}));
  return m;
}

void expect_same(const TensorMap& a, const TensorMap& b) {
  ASSERT_EQ(a.names(), b.names());
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor& x = a.items()[i].second;
    const Tensor& y = b.items()[i].second;
    EXPECT_EQ(x.shape(), y.shape()) << a.items()[i].first;
    EXPECT_EQ(x.dtype(), y.dtype()) << a.items()[i].first;
    if (x.dtype() == DType::Int64)
      EXPECT_EQ(x.to_int64(), y.to_int64()) << a.items()[i].first;
    else
      EXPECT_EQ(x.to_doubles(), y.to_doubles()) << a.items()[i].first;
  }
}

nlohmann::json header_of(const std::string& bytes) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return nlohmann::json::parse(bytes.substr(8, n));
}

}  // namespace

TEST(SafetensorsTest, RoundTripKeepsOrderDtypesShapesAndValues) {
  const TensorMap original = sample_tensors();
  const TensorMap back = dpv::parse_safetensors(dpv::serialize_safetensors(original), "memory");
  expect_same(original, back);
  EXPECT_EQ(back.at("1.num_batches_tracked").ndim(), 0);
  EXPECT_EQ(back.at("empty").numel(), 0);
}

TEST(SafetensorsTest, LayoutFollowsTheSpecification) {
  const std::string bytes = dpv::serialize_safetensors(sample_tensors(), {{"format", "pt"}});
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u) << "data must start 8-byte aligned";
  EXPECT_EQ(bytes[8], '{');
  const std::string header_text = bytes.substr(8, n);
  EXPECT_EQ(header_text.find_last_not_of(' '), header_text.rfind('}')) << "padding is spaces after the JSON";

  const auto header = header_of(bytes);
  EXPECT_EQ(header["__metadata__"]["format"], "pt");
  EXPECT_EQ(header["0.weight"]["dtype"], "F32");
  EXPECT_EQ(header["1.running_var"]["dtype"], "F64");
  EXPECT_EQ(header["target"]["dtype"], "I64");
  EXPECT_EQ(header["1.num_batches_tracked"]["shape"], nlohmann::json::array());
  EXPECT_EQ(header["0.weight"]["shape"], nlohmann::json({2, 3}));
  // Data offsets are contiguous from 0 in TensorMap order and cover the data section exactly.
  uint64_t expected_begin = 0;
  for (const auto& name : sample_tensors().names()) {
    const auto offsets = header[name]["data_offsets"];
    EXPECT_EQ(offsets[0].get<uint64_t>(), expected_begin) << name;
    expected_begin = offsets[1].get<uint64_t>();
  }
  EXPECT_EQ(8 + n + expected_begin, bytes.size());
  // float32 values land little-endian at their offset.
  float first = 0;
  std::memcpy(&first, bytes.data() + 8 + n, 4);
  EXPECT_EQ(first, 1.5f);
}

TEST(SafetensorsTest, NoMetadataKeyWithoutMetadata) {
  EXPECT_FALSE(header_of(dpv::serialize_safetensors(sample_tensors())).contains("__metadata__"));
}

TEST(SafetensorsTest, ReadsFilesOtherWritersProduceInDataOrder) {
  // Keys in alphabetical order in the header, data in another order, as safetensors.torch writes.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
      R"("b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})";
  std::string data(12, '\0');
  const int64_t b = -3;
  const float a = 2.5f;
  std::memcpy(data.data(), &b, 8);
  std::memcpy(data.data() + 8, &a, 4);
  const TensorMap m = dpv::parse_safetensors(raw_file(header + "   ", data), "other.safetensors");
  ASSERT_EQ(m.names(), (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(m.at("b").to_int64(), std::vector<int64_t>{-3});
  EXPECT_EQ(m.at("a").to_doubles(), std::vector<double>{2.5});
}

TEST(SafetensorsTest, SavesViewsWithTheirOwnValues) {
  const Tensor whole = Tensor::from_doubles({4, 2}, DType::Float64, {1, 2, 3, 4, 5, 6, 7, 8});
  TensorMap m;
  m.set("rows", whole.slice0(1, 3));
  const TensorMap back = dpv::parse_safetensors(dpv::serialize_safetensors(m), "memory");
  EXPECT_EQ(back.at("rows").shape(), (dpv::Shape{2, 2}));
  EXPECT_EQ(back.at("rows").to_doubles(), (std::vector<double>{3, 4, 5, 6}));
}

TEST(SafetensorsTest, SaveAndLoadThroughAFile) {
  TempFolder dir;
  const std::string path = dir.file("state.safetensors");
  dpv::save_safetensors(path, sample_tensors(), {{"written_by", "dpviz"}});
  expect_same(sample_tensors(), dpv::load_safetensors(path));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"state.safetensors"});
}

TEST(SafetensorsTest, WriterRejectsReservedAndUndefinedNames) {
  TensorMap reserved;
  reserved.set("__metadata__", Tensor::from_doubles({1}, DType::Float32, {1}));
  EXPECT_NE(error_of([&] { dpv::serialize_safetensors(reserved); }).find("__metadata__"), std::string::npos);
  TensorMap undefined;
  undefined.set("x", Tensor());
  EXPECT_NE(error_of([&] { dpv::serialize_safetensors(undefined); }).find("'x'"), std::string::npos);
}

// --- malformed files: every message names the source and the problem

TEST(SafetensorsTest, RejectsFilesShorterThanTheSizeField) {
  const std::string msg = error_of([] { dpv::parse_safetensors("abc", "tiny.safetensors"); });
  EXPECT_NE(msg.find("tiny.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("too short"), std::string::npos) << msg;
}

TEST(SafetensorsTest, RejectsAHeaderLongerThanTheFile) {
  std::string bytes = raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcd");
  const uint64_t lie = 5000;
  std::memcpy(bytes.data(), &lie, 8);
  const std::string msg = error_of([&] { dpv::parse_safetensors(bytes, "lie.safetensors"); });
  EXPECT_NE(msg.find("lie.safetensors: header claims 5000 bytes"), std::string::npos) << msg;
}

TEST(SafetensorsTest, RejectsAHugeHeaderSize) {
  std::string bytes(16, '{');
  const uint64_t lie = uint64_t{1} << 40;
  std::memcpy(bytes.data(), &lie, 8);
  const std::string msg = error_of([&] { dpv::parse_safetensors(bytes, "huge.safetensors"); });
  EXPECT_NE(msg.find("100 MB"), std::string::npos) << msg;
}

TEST(SafetensorsTest, RejectsAHeaderThatIsNotJson) {
  EXPECT_NE(error_of([] { dpv::parse_safetensors(raw_file("[1, 2]", ""), "x"); }).find("does not start with '{'"),
            std::string::npos);
  // Truncated JSON: the message carries nlohmann's position.
  const std::string msg = error_of([] { dpv::parse_safetensors(raw_file(R"({"a": {"dtype": "F3)", ""), "bad.st"); });
  EXPECT_NE(msg.find("bad.st: the header: not valid JSON (at byte"), std::string::npos) << msg;
  const std::string overflow = error_of(
      [] { dpv::parse_safetensors(raw_file(R"({"a":{"dtype":"F32","shape":[1e999],"data_offsets":[0,4]}})", "abcd"), "n.st"); });
  EXPECT_NE(overflow.find("n.st: the header: not valid JSON"), std::string::npos) << overflow;
}

TEST(SafetensorsTest, RejectsEntriesWithMissingOrMistypedFields) {
  auto parse = [](const std::string& entry, const std::string& data = std::string(4, '\0')) {
    return error_of([&] { dpv::parse_safetensors(raw_file("{\"t\":" + entry + "}", data), "f.st"); });
  };
  EXPECT_NE(parse("[1]").find("f.st: tensor 't': expected an object"), std::string::npos);
  EXPECT_NE(parse(R"({"shape":[1],"data_offsets":[0,4]})").find("missing 'dtype'"), std::string::npos);
  EXPECT_NE(parse(R"({"dtype":"F32","data_offsets":[0,4]})").find("missing 'shape'"), std::string::npos);
  EXPECT_NE(parse(R"({"dtype":"F32","shape":[1]})").find("missing 'data_offsets'"), std::string::npos);
  EXPECT_NE(parse(R"({"dtype":32,"shape":[1],"data_offsets":[0,4]})").find("'dtype' must be a string"),
            std::string::npos);
  EXPECT_NE(parse(R"({"dtype":"F32","shape":"1","data_offsets":[0,4]})").find("'shape' must be a list"),
            std::string::npos);
  EXPECT_NE(parse(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})").find("not a non-negative integer"),
            std::string::npos);
  EXPECT_NE(parse(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})").find("not a non-negative integer"),
            std::string::npos);
  EXPECT_NE(parse(R"({"dtype":"F32","shape":[1],"data_offsets":[0]})").find("two non-negative integers"),
            std::string::npos);
  EXPECT_NE(parse(R"({"dtype":"F32","shape":[1],"data_offsets":[4,0]})").find("end before they begin"),
            std::string::npos);
}

TEST(SafetensorsTest, RejectsUnsupportedDtypesByName) {
  const std::string msg = error_of([] {
    dpv::parse_safetensors(raw_file(R"({"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", "abcd"),
                           "model.safetensors");
  });
  EXPECT_NE(msg.find("model.safetensors: tensor 'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("BF16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float32, float64 or int64"), std::string::npos) << msg;
}

TEST(SafetensorsTest, RejectsShapesWhoseSizeOverflows) {
  const std::string msg = error_of([] {
    dpv::parse_safetensors(
        raw_file(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296,4],"data_offsets":[0,8]}})", std::string(8, 0)),
        "o.st");
  });
  EXPECT_NE(msg.find("o.st: tensor 'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("corrupt header"), std::string::npos) << msg;
}

TEST(SafetensorsTest, RejectsOffsetsThatDisagreeWithTheShape) {
  const std::string msg = error_of([] {
    dpv::parse_safetensors(raw_file(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
                                    std::string(20, 0)),
                           "s.st");
  });
  EXPECT_NE(msg.find("needs 24 bytes but data_offsets [0, 20] span 20 bytes"), std::string::npos) << msg;
}

TEST(SafetensorsTest, RejectsTensorsBeyondTheData) {
  const std::string msg = error_of([] {
    dpv::parse_safetensors(raw_file(R"({"input":{"dtype":"F32","shape":[1000],"data_offsets":[0,4000]}})",
                                    std::string(1200, 0)),
                           "batch.safetensors");
  });
  EXPECT_EQ(msg,
            "batch.safetensors: tensor 'input' claims 4000 bytes at offset 0 but the file holds only 1200 bytes of "
            "data (truncated or corrupt file)");
}

TEST(SafetensorsTest, RejectsATruncatedFile) {
  const std::string bytes = dpv::serialize_safetensors(sample_tensors());
  const std::string msg = error_of([&] { dpv::parse_safetensors(bytes.substr(0, bytes.size() - 3), "cut.st"); });
  EXPECT_NE(msg.find("cut.st"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST(SafetensorsTest, RejectsOverlapsHolesAndTrailingBytes) {
  const std::string overlap = error_of([] {
    dpv::parse_safetensors(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                    std::string(12, 0)),
                           "ov.st");
  });
  EXPECT_NE(overlap.find("ov.st: tensors 'a' [0, 8] and 'b' [4, 12] overlap"), std::string::npos) << overlap;

  const std::string hole = error_of([] {
    dpv::parse_safetensors(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, 0)),
                           "hole.st");
  });
  EXPECT_NE(hole.find("hole.st: data bytes [0, 4) belong to no tensor"), std::string::npos) << hole;

  const std::string trailing = error_of([] {
    dpv::parse_safetensors(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(8, 0)),
                           "tail.st");
  });
  EXPECT_NE(trailing.find("tail.st: the file has 4 bytes after the last tensor's data"), std::string::npos)
      << trailing;
}

TEST(SafetensorsTest, RejectsMetadataThatIsNotStrings) {
  const std::string msg = error_of([] {
    dpv::parse_safetensors(raw_file(R"({"__metadata__":{"epoch":3}})", ""), "meta.st");
  });
  EXPECT_NE(msg.find("meta.st: '__metadata__' entry 'epoch' must be a string"), std::string::npos) << msg;
}

TEST(SafetensorsTest, LoadNamesAMissingFile) {
  const std::string msg = error_of([] { dpv::load_safetensors("/nonexistent/dir/w.safetensors"); });
  EXPECT_NE(msg.find("/nonexistent/dir/w.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
}

// --- atomic writes

TEST(AtomicFileTest, WritesReplacesAndLeavesNoTemporaryFiles) {
  TempFolder dir;
  const std::string path = dir.file("out.bin");
  dpv::write_file_atomic(path, std::string("first\0version", 13));
  EXPECT_EQ(dpv::read_file(path, dpv::kSafetensorsInput), std::string("first\0version", 13));
  dpv::write_file_atomic(path, "second");
  EXPECT_EQ(dpv::read_file(path, dpv::kSafetensorsInput), "second");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"out.bin"});
}

TEST(AtomicFileTest, MissingFolderThrowsWithTheSystemReason) {
  TempFolder dir;
  const std::string path = dir.file("no-such-folder/out.bin");
  const std::string msg = error_of([&] { dpv::write_file_atomic(path, "data"); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::strerror(ENOENT)), std::string::npos) << msg;
  EXPECT_TRUE(dir.entries().empty());
}

TEST(AtomicFileTest, AFolderInThePlaceOfTheFileIsRefusedAndLeftAlone) {
  TempFolder dir;
  // A non-empty folder where the file should go: refused before any temporary file is made.
  fs::create_directories(dir.file("target"));
  dpv::write_file_atomic(dir.file("target/keep"), "keep");
  const std::string msg = error_of([&] { dpv::write_file_atomic(dir.file("target"), "data"); });
  EXPECT_NE(msg.find("Is a directory"), std::string::npos) << msg;
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"target"});
  EXPECT_EQ(dpv::read_file(dir.file("target/keep"), dpv::kSafetensorsInput), "keep");
}

TEST(AtomicFileTest, FailedWriteKeepsTheOldFile) {
  TempFolder dir;
  const std::string path = dir.file("state.bin");
  dpv::write_file_atomic(path, "old contents");
  // Limit this process's file size so the write itself fails (EFBIG) half way.
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string msg = error_of([&] { dpv::write_file_atomic(path, std::string(1 << 20, 'x')); });
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous_handler);
  EXPECT_NE(msg.find(std::strerror(EFBIG)), std::string::npos) << msg;
  EXPECT_EQ(dpv::read_file(path, dpv::kSafetensorsInput), "old contents");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"state.bin"});
}

TEST(AtomicFileTest, ReadFileNamesFoldersAndMissingFiles) {
  TempFolder dir;
  EXPECT_NE(error_of([&] { dpv::read_file(dir.file(""), dpv::kSafetensorsInput); }).find("Is a directory"), std::string::npos);
  const std::string msg = error_of([&] { dpv::read_file(dir.file("missing.txt"), dpv::kSafetensorsInput); });
  EXPECT_NE(msg.find("missing.txt"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::strerror(ENOENT)), std::string::npos) << msg;
}
