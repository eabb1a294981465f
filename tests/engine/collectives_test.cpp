// Host-thread collectives: results, left-fold order, and the nccl-tests bandwidth definitions.
// Also run under ThreadSanitizer in CI (the tsan preset).
#include <gtest/gtest.h>

#include "engine/backend_registry.h"
#include "engine/collectives.h"
#include "engine/device.h"
#include "engine/error.h"

using namespace dpv;

namespace {
std::vector<Tensor> per_device(DeviceSet& devs, int64_t n, double scale) {
  std::vector<Tensor> bufs;
  for (int d = 0; d < devs.size(); ++d) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * (d + 1) + static_cast<double>(i);
    bufs.push_back(Tensor::from_doubles({n}, DType::Float64, v).to(devs.shared(d)));
  }
  return bufs;
}
}  // namespace

TEST(HostCollectives, BroadcastReduceAllReduceAllGather) {
  auto devs = DeviceSet::create("cpu:4");
  auto coll = make_collectives(devs);
  EXPECT_EQ(coll->transport(), "host threads");

  auto b = per_device(*devs, 1000, 10.0);
  CollectiveReport r = coll->broadcast(b, 0);
  for (auto& t : b) EXPECT_EQ(t.to_doubles(), b[0].to_doubles());
  EXPECT_EQ(r.bytes, 8000u);
  EXPECT_EQ(r.ranks, 4);
  EXPECT_NEAR(r.busbw, r.algbw, 1e-12);

  auto red = per_device(*devs, 1000, 10.0);
  const auto untouched = red[2].to_doubles();
  coll->reduce_add(red, 0);
  auto sum = red[0].to_doubles();
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(sum[static_cast<size_t>(i)], 100.0 + 4.0 * static_cast<double>(i));
  EXPECT_EQ(red[2].to_doubles(), untouched);  // only the root receives

  auto ar = per_device(*devs, 1000, 1.0);
  r = coll->all_reduce(ar);
  for (auto& t : ar) EXPECT_EQ(t.to_doubles()[5], 10.0 + 20.0);
  EXPECT_NEAR(r.busbw, r.algbw * 2.0 * 3.0 / 4.0, 1e-9 * r.algbw + 1e-12);

  auto in = per_device(*devs, 3, 100.0);
  std::vector<Tensor> out;
  for (int d = 0; d < 4; ++d) out.push_back(Tensor::zeros({12}, DType::Float64, devs->shared(d)));
  r = coll->all_gather(in, out);
  EXPECT_EQ(r.bytes, 4u * 3u * 8u);
  for (auto& o : out) {
    auto v = o.to_doubles();
    EXPECT_EQ(v[0], 100.0);
    EXPECT_EQ(v[3], 200.0);
    EXPECT_EQ(v[11], 402.0);
  }
}

TEST(HostCollectives, ReportsBandwidthFromBytesAndTime) {
  CollectiveReport r;
  r.op = CollectiveOp::AllGather;
  r.ranks = 4;
  r.bytes = 4'000'000'000;
  r.seconds = 2.0;
  finish_report(r);
  EXPECT_DOUBLE_EQ(r.algbw, 2.0);
  EXPECT_DOUBLE_EQ(r.busbw, 1.5);
}

// nccl-tests' reduce_scatter: bytes = the whole input (n x each rank's piece), busbw = algbw (n-1)/n,
// as for all_gather; all_reduce moves twice that.
TEST(HostCollectives, ReduceScatterBusBandwidthIsAllGathersNotAllReduces) {
  CollectiveReport r;
  r.op = CollectiveOp::ReduceScatter;
  r.ranks = 4;
  r.bytes = 4'000'000'000;
  r.seconds = 2.0;
  finish_report(r);
  EXPECT_DOUBLE_EQ(r.algbw, 2.0);
  EXPECT_DOUBLE_EQ(r.busbw, 1.5);
  EXPECT_STREQ(collective_op_name(r.op), "reduce_scatter");
  r.op = CollectiveOp::AllReduce;
  finish_report(r);
  EXPECT_DOUBLE_EQ(r.busbw, 3.0);
}

TEST(HostCollectives, RejectsMismatchedBuffers) {
  auto devs = DeviceSet::create("cpu:2");
  auto coll = make_collectives(devs);
  std::vector<Tensor> bufs{Tensor::zeros({4}, DType::Float32, devs->shared(0)),
                           Tensor::zeros({5}, DType::Float32, devs->shared(1))};
  EXPECT_THROW(coll->reduce_add(bufs, 0), Error);
}

TEST(DeviceSpec, ParsesEveryFormAndRejectsBadOnes) {
  EXPECT_EQ(parse_device_spec("cpu:4").count, 4);
  EXPECT_EQ(parse_device_spec("cuda:0,1").gpus, (std::vector<int>{0, 1}));
  auto v = parse_device_spec("cuda:0x4");
  EXPECT_TRUE(v.is_virtual);
  EXPECT_EQ(v.gpus, (std::vector<int>{0, 0, 0, 0}));
  for (const char* bad : {"", "gpu:2", "cpu:0", "cpu:x", "cpu:-1", "cuda:", "cuda:0,0", "cuda:0x0", "cpu:65"})
    EXPECT_THROW(parse_device_spec(bad), Error) << bad;
  try {
    parse_device_spec("tpu:2");
    FAIL() << "tpu:2 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected cpu:K"), std::string::npos);
  }
}

TEST(DeviceSpec, CudaWithoutBackendIsAClearError) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is available here";
  try {
    DeviceSet::create("cuda:0x2");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA is not available"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("cpu:K"), std::string::npos);
  }
}

TEST(DeviceSet, LabelsSimulatedDevicesHonestly) {
  auto devs = DeviceSet::create("cpu:3");
  EXPECT_EQ((*devs)[2].label(), "GPU 2 (simulated on CPU)");
  EXPECT_EQ((*devs)[1].name(), "cpu:1");
  // The label's two parts, for a front end that shows them apart (the Iteration scene's boxes).
  EXPECT_EQ((*devs)[2].display_name(), "GPU 2");
  EXPECT_EQ((*devs)[2].detail(), "simulated on CPU");
}
