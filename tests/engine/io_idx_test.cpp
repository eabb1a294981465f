// MNIST IDX files: valid files load; lying, truncated, padded and mismatched files are rejected.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "tests/support/errors.h"
#include "engine/io/idx.h"

namespace fs = std::filesystem;

namespace {

using dpv::testing::error_of;

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

std::string images_file(uint32_t count, uint32_t rows, uint32_t cols, const std::vector<uint8_t>& pixels) {
  return be32(0x803) + be32(count) + be32(rows) + be32(cols) + std::string(pixels.begin(), pixels.end());
}

std::string labels_file(const std::vector<uint8_t>& labels) {
  return be32(0x801) + be32(static_cast<uint32_t>(labels.size())) + std::string(labels.begin(), labels.end());
}

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("dpv-idx-test-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    dpv::write_file_atomic(path, bytes);
    return path;
  }
  fs::path dir_;
};

}  // namespace

TEST_F(IdxTest, LoadsImagesScaledToUnitRange) {
  // 3 images of 2x2 pixels.
  const std::vector<uint8_t> pixels{0, 255, 51, 102, 1, 2, 3, 4, 255, 255, 0, 0};
  const dpv::Tensor images = dpv::load_idx_images(write("img", images_file(3, 2, 2, pixels)));
  EXPECT_EQ(images.shape(), (dpv::Shape{3, 4}));
  EXPECT_EQ(images.dtype(), dpv::DType::Float32);
  const std::vector<double> values = images.to_doubles();
  for (size_t i = 0; i < pixels.size(); ++i) EXPECT_FLOAT_EQ(values[i], pixels[i] / 255.0f) << i;
}

TEST_F(IdxTest, LoadsLabelsAndCountsClasses) {
  const std::string img = write("img", images_file(4, 1, 3, std::vector<uint8_t>(12, 7)));
  const std::string lab = write("lab", labels_file({3, 0, 5, 1}));
  const dpv::IdxDataset data = dpv::load_idx_dataset(img, lab);
  EXPECT_EQ(data.labels.dtype(), dpv::DType::Int64);
  EXPECT_EQ(data.labels.to_int64(), (std::vector<int64_t>{3, 0, 5, 1}));
  EXPECT_EQ(data.classes, 6);
  EXPECT_EQ(data.images.shape(), (dpv::Shape{4, 3}));
}

TEST_F(IdxTest, AtLeastTwoClasses) {
  const dpv::IdxDataset data = dpv::load_idx_dataset(write("img", images_file(2, 1, 1, {1, 2})),
                                                     write("lab", labels_file({0, 0})));
  EXPECT_EQ(data.classes, 2);
}

TEST_F(IdxTest, RejectsWrongMagicNamingTheKind) {
  const std::string lab = write("lab", labels_file({1, 2}));
  const std::string msg = error_of([&] { dpv::load_idx_images(lab); });
  EXPECT_NE(msg.find(lab), std::string::npos) << msg;
  EXPECT_NE(msg.find("0x00000801 (an IDX label file), expected 0x00000803"), std::string::npos) << msg;
  const std::string junk = write("junk", "hello world, not idx");
  EXPECT_NE(error_of([&] { dpv::load_idx_labels(junk); }).find("not an IDX file"), std::string::npos);
}

TEST_F(IdxTest, RejectsTruncatedAndPaddedFiles) {
  const std::string truncated = write("short", images_file(3, 2, 2, std::vector<uint8_t>(11, 0)));
  std::string msg = error_of([&] { dpv::load_idx_images(truncated); });
  EXPECT_NE(msg.find("promises 12 data bytes but the file holds only 11"), std::string::npos) << msg;

  const std::string padded = write("long", images_file(3, 2, 2, std::vector<uint8_t>(13, 0)));
  msg = error_of([&] { dpv::load_idx_images(padded); });
  EXPECT_NE(msg.find("1 bytes more than its header declares"), std::string::npos) << msg;

  // A header that claims billions of images must not make the reader allocate or read past the end.
  const std::string liar = write("liar", images_file(0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, {1, 2, 3}));
  msg = error_of([&] { dpv::load_idx_images(liar); });
  EXPECT_NE(msg.find(liar), std::string::npos) << msg;
  EXPECT_NE(msg.find("corrupt"), std::string::npos) << msg;

  const std::string cut_header = write("cut", be32(0x803) + be32(1));
  EXPECT_NE(error_of([&] { dpv::load_idx_images(cut_header); }).find("ends inside its 16-byte header"),
            std::string::npos);
  const std::string labels_long = write("lab", labels_file({1, 2}) + "x");
  EXPECT_NE(error_of([&] { dpv::load_idx_labels(labels_long); }).find("more than its header declares"),
            std::string::npos);
}

TEST_F(IdxTest, RejectsMismatchedCountsAndBadLabels) {
  const std::string img = write("img", images_file(3, 1, 1, {1, 2, 3}));
  const std::string lab = write("lab", labels_file({1, 2}));
  const std::string msg = error_of([&] { dpv::load_idx_dataset(img, lab); });
  EXPECT_NE(msg.find("holds 3 images but"), std::string::npos) << msg;
  EXPECT_NE(msg.find("holds 2 labels"), std::string::npos) << msg;

  const std::string bad = write("bad", labels_file({1, 10, 2}));
  EXPECT_NE(error_of([&] { dpv::load_idx_labels(bad); }).find("label 1 is 10"), std::string::npos);
}

TEST_F(IdxTest, ExplainsGzipAndMissingFiles) {
  const std::string gz = write("train.gz", std::string("\x1f\x8b\x08\x00rest", 8));
  EXPECT_NE(error_of([&] { dpv::load_idx_images(gz); }).find("gzip-compressed"), std::string::npos);
  const std::string missing = (dir_ / "absent-idx3-ubyte").string();
  EXPECT_NE(error_of([&] { dpv::load_idx_images(missing); }).find(missing), std::string::npos);
}
