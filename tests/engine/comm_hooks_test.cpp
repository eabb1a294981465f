// DDP communication hooks (engine/ddp/comm_hooks): PowerSGD's random numbers and Gram-Schmidt bit
// for bit against values real PyTorch 1.13 and NumPy produced (tests/fixtures/comm_hooks/
// torch_randn.json, from make_comm_hook_fixtures.py), float16 rounding, the hooks on in-process
// ranks (no pre-division, the hook's mean replaces the all-reduce) and the refusals.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/ddp/comm_hooks/comm_hook.h"
#include "engine/ddp/comm_hooks/powersgd.h"
#include "engine/ddp/comm_hooks/torch_random.h"
#include "engine/float16.h"
#include "engine/error.h"
#include "engine/process_groups/in_process_group.h"
#include "fixture_support.h"
#include "rank_threads.h"

namespace dpv {
namespace {

nlohmann::json torch_values() {
  std::ifstream in(test::fixture_dir("comm_hooks") / "torch_randn.json");
  return nlohmann::json::parse(in);
}

std::vector<float> floats(const nlohmann::json& bits) {
  std::vector<float> out;
  for (const auto& b : bits) out.push_back(std::bit_cast<float>(b.get<uint32_t>()));
  return out;
}

TEST(CommHooks, NumpyLegacyRandintMatchesNumpy) {
  const nlohmann::json values = torch_values();
  for (const auto& c : values.at("randint")) {
    std::mt19937 engine(c.at("seed").get<uint32_t>());
    for (const auto& want : c.at("values")) EXPECT_EQ(numpy_legacy_randint(engine, 1'000'000'000), want.get<int64_t>());
  }
}

TEST(CommHooks, TorchRandnFloat32IsBitExact) {
  int checked = 0;
  const nlohmann::json values = torch_values();
  for (const auto& c : values.at("randn")) {
    TorchCpuGenerator generator(c.at("seed").get<uint64_t>());
    const auto& sizes = c.at("sizes");
    for (size_t i = 0; i < sizes.size(); ++i) {
      const std::vector<float> got = generator.randn_float(sizes[i].get<int64_t>());
      const std::vector<float> want = floats(c.at("bits")[i]);
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < got.size(); ++k, ++checked)
        EXPECT_EQ(std::bit_cast<uint32_t>(got[k]), std::bit_cast<uint32_t>(want[k]))
            << "seed " << c.at("seed") << " call " << i << " element " << k << ": " << got[k] << " vs " << want[k];
    }
  }
  EXPECT_GT(checked, 300);
}

TEST(CommHooks, GramSchmidtMatchesPowerSgd) {
  const nlohmann::json values = torch_values();
  for (const auto& c : values.at("gram_schmidt")) {
    std::vector<float> m = floats(c.at("input"));
    const int64_t rows = c.at("rows"), cols = c.at("cols");
    orthogonalize_gram_schmidt(m, rows, cols, c.at("epsilon").get<double>());
    const std::vector<float> want = floats(c.at("output"));
    // torch.norm and torch.sum reduce in their vectorised order; here in double: within 2 float32 ulps.
    for (size_t k = 0; k < m.size(); ++k) EXPECT_NEAR(m[k], want[k], 2.5e-7 * std::max(1.0f, std::fabs(want[k]))) << k;
    // The columns come out orthonormal.
    for (int64_t a = 0; a < cols; ++a)
      for (int64_t b = 0; b < cols; ++b) {
        double dot = 0;
        for (int64_t i = 0; i < rows; ++i) dot += static_cast<double>(m[i * cols + a]) * m[i * cols + b];
        EXPECT_NEAR(dot, a == b ? 1.0 : 0.0, 1e-5);
      }
  }
}

TEST(CommHooks, HouseholderQrMatchesTorchLinalgQr) {
  const nlohmann::json values = torch_values();
  int checked = 0;
  for (const auto& c : values.at("qr")) {
    std::vector<float> m = floats(c.at("input"));
    const int64_t rows = c.at("rows"), cols = c.at("cols");
    orthogonalize_householder_qr(m, rows, cols);
    const std::vector<float> want = floats(c.at("output"));
    // LAPACK works in float32: within a few float32 roundings; a column of the other sign is off by 2.
    for (size_t k = 0; k < m.size(); ++k, ++checked) EXPECT_NEAR(m[k], want[k], 2e-6) << rows << "x" << cols << " " << k;
  }
  EXPECT_GE(checked, 100);
}

TEST(CommHooks, Float16RoundingIsNearestEven) {
  EXPECT_EQ(round_to_float16(1.0f), 1.0f);
  EXPECT_EQ(round_to_float16(1.0f + 0x1.0p-11f), 1.0f);                   // a tie goes to even
  EXPECT_EQ(round_to_float16(1.0f + 3 * 0x1.0p-11f), 1.0f + 0x1.0p-9f);   // a tie to the even above
  EXPECT_EQ(round_to_float16(1.0f + 0x1.8p-11f), 1.0f + 0x1.0p-10f);      // above the tie
  EXPECT_EQ(round_to_float16(65520.0f), INFINITY);                        // past the largest half
  EXPECT_EQ(round_to_float16(0x1.0p-25f), 0.0f);                          // half of the smallest subnormal: even
  EXPECT_EQ(round_to_float16(0x1.8p-25f), 0x1.0p-24f);
}

// Element i of the bucket below: the matrix [3, 2] is (row + 1) * (col + 1), of rank 1.
int value(int i) { return i < 6 ? (i / 2 + 1) * (i % 2 + 1) : i + 1; }

// One bucket [a (3x2 matrix), b (vector of 3)] on W in-process ranks: rank r holds (r + 1) * 0.1 * value(i).
std::vector<std::vector<float>> run_hook_on_ranks(const CommHookOptions& options, int world, int iterations) {
  auto group = make_in_process_group(world);
  std::vector<std::vector<float>> results(static_cast<size_t>(world));
  const auto errors = testing::on_ranks(group, [&](ProcessGroup& g) {
    std::unique_ptr<CommHook> hook = make_comm_hook(options, g);
    for (int it = 0; it < iterations; ++it) {
      GradBucket bucket{0, true, Tensor::empty({9}, DType::Float32), {{3, 2}, {3}}, {0, 6}};
      for (int i = 0; i < 9; ++i) bucket.buffer.data<float>()[i] = static_cast<float>((g.rank() + 1) * value(i)) * 0.1f;
      hook->run(bucket, g);
      const float* d = bucket.buffer.data<float>();
      results[static_cast<size_t>(g.rank())].assign(d, d + 9);
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  return results;
}

TEST(CommHooks, AllreduceHookDividesThenSums) {
  const auto results = run_hook_on_ranks({CommHookKind::AllReduce, {}}, 3, 1);
  for (const auto& r : results)
    for (int i = 0; i < 9; ++i) {
      float want = 0;
      for (int rank = 0; rank < 3; ++rank) want += static_cast<float>((rank + 1) * value(i)) * 0.1f / 3.0f;
      EXPECT_NEAR(r[static_cast<size_t>(i)], want, 1e-6) << i;
    }
}

TEST(CommHooks, Fp16HookGivesFloat16Means) {
  const auto results = run_hook_on_ranks({CommHookKind::Fp16Compress, {}}, 2, 1);
  for (int i = 0; i < 9; ++i) {
    const float a = round_to_float16(round_to_float16(static_cast<float>(value(i)) * 0.1f) / 2.0f);
    const float b = round_to_float16(round_to_float16(static_cast<float>(2 * value(i)) * 0.1f) / 2.0f);
    EXPECT_EQ(results[0][static_cast<size_t>(i)], round_to_float16(a + b)) << i;
    EXPECT_EQ(results[1][static_cast<size_t>(i)], results[0][static_cast<size_t>(i)]);
  }
}

TEST(CommHooks, Fp16HookAddsInGloosRingOrder) {
  // 3 ranks, 7 elements: Gloo's chunks are [0, 4) (rank 0's: ranks 2 and 1 first, rank 0 last)
  // and [4, 7) (rank 1's). Rank 0 brings 1.0, the others 2**-11 each (after the division by 3):
  // 2**-11 + 2**-11 + 1 = 1 + 2**-10 where rank 0 comes last, 1 + 2**-11 + 2**-11 = 1 (ties to
  // even, twice) where it does not. (PyTorch 1.13 over Gloo gives exactly this.)
  auto group = make_in_process_group(3);
  std::vector<std::vector<float>> results(3);
  const auto errors = testing::on_ranks(group, [&](ProcessGroup& g) {
    std::unique_ptr<CommHook> hook = make_comm_hook({CommHookKind::Fp16Compress, {}}, g);
    GradBucket bucket{0, true, Tensor::full({7}, DType::Float32, g.rank() == 0 ? 3.0 : 3.0 * 0x1.0p-11), {{7}}, {0}};
    hook->run(bucket, g);
    results[static_cast<size_t>(g.rank())].assign(bucket.buffer.data<float>(), bucket.buffer.data<float>() + 7);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  for (int i = 0; i < 7; ++i) EXPECT_EQ(results[0][static_cast<size_t>(i)], i < 4 ? 1.0f + 0x1.0p-10f : 1.0f) << i;
  EXPECT_EQ(results[1], results[0]);
}

TEST(CommHooks, PowerSgdBeforeStartIsTheMeanThenALowRankApproximation) {
  CommHookOptions options{CommHookKind::PowerSgd, {}};
  options.powersgd.start_powerSGD_iter = 2;
  options.powersgd.min_compression_rate = 0;  // compress the 3x2 matrix too
  const auto vanilla = run_hook_on_ranks(options, 2, 1);
  const auto compressed = run_hook_on_ranks(options, 2, 3);
  for (int i = 0; i < 9; ++i) EXPECT_FLOAT_EQ(vanilla[0][static_cast<size_t>(i)], 0.15f * static_cast<float>(value(i)));
  // Every rank's matrix is a multiple of the same rank-1 matrix: PowerSGD rank 1 recovers the mean,
  // and the biases are all-reduced as they are.
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(compressed[0][static_cast<size_t>(i)], 0.15f * static_cast<float>(value(i)), 1e-5);
  EXPECT_EQ(compressed[0], compressed[1]);
}

TEST(CommHooks, RefusesWhatPyTorchRefuses) {
  CommHookOptions options{CommHookKind::PowerSgd, {}};
  options.powersgd.start_powerSGD_iter = 1;
  EXPECT_THROW(check_comm_hook_options(options), Error);
  options.powersgd.use_error_feedback = options.powersgd.warm_start = false;
  EXPECT_NO_THROW(check_comm_hook_options(options));
  options.powersgd.matrix_approximation_rank = 0;
  EXPECT_THROW(check_comm_hook_options(options), Error);
  auto group = make_in_process_group(1);
  try {
    make_comm_hook({CommHookKind::Bf16Compress, {}}, *group[0]);
    FAIL() << "bf16 must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Invalid scalar type"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_comm_hook("fp32"), Error);
}

}  // namespace
}  // namespace dpv
