// safetensors headers at scale (issue 27, R10): 100,000 tensors read and written with every name,
// shape and value intact, and a shape of absurd rank refused with a message. The reader used to
// search the tensors read so far for every new name and rebuild the whole shape's text for every
// shape entry (quadratic: minutes for these files); these tests assert the results, not the time.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "engine/error.h"
#include "engine/io/safetensors.h"
#include "tests/support/errors.h"

using dpv::DType;
using dpv::Tensor;
using dpv::TensorMap;

namespace {

using dpv::testing::error_of;

constexpr int kManyTensors = 100'000;

std::string raw_file(const std::string& header, const std::string& data) {
  const uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}

TEST(SafetensorsScaleTest, AHundredThousandTensorsRoundTripInOrder) {
  TensorMap many;
  for (int i = 0; i < kManyTensors; ++i)
    many.items().emplace_back("layer" + std::to_string(i) + ".weight",
                              Tensor::from_doubles({1}, DType::Float32, {static_cast<double>(i)}));
  const std::string bytes = dpv::serialize_safetensors(many, {{"producer", "scale test"}});
  const TensorMap back = dpv::parse_safetensors(bytes, "many.safetensors");
  ASSERT_EQ(back.size(), static_cast<size_t>(kManyTensors));
  for (int i = 0; i < kManyTensors; i += 997) {  // a spread of entries, first to last
    const auto& [name, t] = back.items()[static_cast<size_t>(i)];
    EXPECT_EQ(name, "layer" + std::to_string(i) + ".weight");
    EXPECT_EQ(t.shape(), dpv::Shape{1});
    EXPECT_EQ(t.to_doubles()[0], static_cast<double>(i));
  }
  EXPECT_EQ(back.items().back().first, "layer" + std::to_string(kManyTensors - 1) + ".weight");
}

TEST(SafetensorsScaleTest, AHundredThousandTensorsFromAnotherWriter) {
  // Written by hand in reverse data order (any writer may order its keys as it likes).
  std::string header = "{";
  std::string data(static_cast<size_t>(kManyTensors) * 4, '\0');
  for (int i = kManyTensors - 1; i >= 0; --i) {
    const float v = static_cast<float>(i);
    std::memcpy(&data[static_cast<size_t>(i) * 4], &v, 4);
    header += "\"t" + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[" +
              std::to_string(i * 4) + "," + std::to_string(i * 4 + 4) + "]}" + (i > 0 ? "," : "");
  }
  header += "}";
  const TensorMap back = dpv::parse_safetensors(raw_file(header, data), "hand.safetensors");
  ASSERT_EQ(back.size(), static_cast<size_t>(kManyTensors));
  EXPECT_EQ(back.items()[0].first, "t0");  // data order
  EXPECT_EQ(back.items()[12345].first, "t12345");
  EXPECT_EQ(back.items()[12345].second.to_doubles()[0], 12345.0);
}

TEST(SafetensorsScaleTest, RefusesAShapeOfAbsurdRank) {
  // 100,000 dimensions of size 1: one element, so only the rank limit can refuse it.
  std::string shape = "[1";
  for (int i = 1; i < 100'000; ++i) shape += ",1";
  shape += "]";
  const std::string header = "{\"x\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[0,4]}}";
  const std::string e = error_of([&] { dpv::parse_safetensors(raw_file(header, std::string(4, '\0')), "deep.st"); });
  EXPECT_NE(e.find("deep.st: tensor 'x': shape has 100000 dimensions, more than 64"), std::string::npos) << e;
}

TEST(SafetensorsScaleTest, SixtyFourDimensionsAreStillRead) {
  std::string shape = "[1";
  for (int i = 1; i < 64; ++i) shape += ",1";
  shape += "]";
  const std::string header = "{\"x\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[0,4]}}";
  const TensorMap back = dpv::parse_safetensors(raw_file(header, std::string(4, '\0')), "rank64.st");
  EXPECT_EQ(back.at("x").shape().size(), 64u);
}

}  // namespace
