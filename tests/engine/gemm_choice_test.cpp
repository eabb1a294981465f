// The CPU backend's GEMM library per product shape (engine/cpu/gemm_choice.h): the faster library
// under injected timings is chosen, each shape is timed once however many threads meet it, tiny
// products and pins skip timing, the table round-trips through its text form, and with rank 0's
// sharing a second chooser takes rank 0's choice instead of timing its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "engine/core_backends.h"
#include "engine/cpu/gemm_choice.h"
#include "engine/error.h"
#include "engine/tensor.h"
#include "tests/support/errors.h"

namespace dpv {
namespace {

using cpu::GemmChooser;

constexpr CpuGemmShape kLarge{false, true, 256, 1024, 784, true};  // mlp-large's first forward
constexpr CpuGemmShape kOther{true, false, 1024, 784, 256, true};
constexpr CpuGemmShape kTiny{false, true, 8, 10, 2, true};

// The call throws a dpv::Error whose message holds every needle.
template <typename F>
void expect_error_containing(F&& call, const std::vector<std::string>& needles) {
  const std::string message = testing::error_of(std::forward<F>(call));
  for (const std::string& needle : needles) EXPECT_NE(message.find(needle), std::string::npos) << message;
}

// A timer that says `openblas` and `onednn` seconds for every run and counts the runs.
struct FakeTimer {
  double openblas = 1e-3, onednn = 1e-3;
  std::atomic<int> runs{0};
  cpu::GemmTimer timer() {
    return [this](CpuGemmLibrary library) {
      ++runs;
      return library == CpuGemmLibrary::Onednn ? onednn : openblas;
    };
  }
};

TEST(GemmChoice, PicksTheFasterLibraryUnderInjectedTimings) {
  for (const auto& [openblas, onednn, expected] :
       {std::tuple{2e-3, 1e-3, CpuGemmLibrary::Onednn}, std::tuple{1e-3, 2e-3, CpuGemmLibrary::OpenBlas}}) {
    GemmChooser chooser(/*onednn_built=*/true, CpuGemmPin::Auto);
    FakeTimer t;
    t.openblas = openblas;
    t.onednn = onednn;
    EXPECT_EQ(chooser.choose(kLarge, t.timer()), expected);
    EXPECT_EQ(chooser.chosen(kLarge), expected);
    EXPECT_GT(t.runs.load(), 2);  // warm-up runs and timed runs
  }
}

TEST(GemmChoice, TimesEachShapeOnceAndRemembersIt) {
  GemmChooser chooser(true, CpuGemmPin::Auto);
  FakeTimer t;
  t.openblas = 5e-3;
  EXPECT_FALSE(chooser.chosen(kLarge).has_value());
  chooser.choose(kLarge, t.timer());
  const int runs = t.runs.load();
  t.onednn = 9e-3;  // later timings would now pick OpenBLAS: a remembered shape is not timed again
  for (int i = 0; i < 5; ++i) EXPECT_EQ(chooser.choose(kLarge, t.timer()), CpuGemmLibrary::Onednn);
  EXPECT_EQ(t.runs.load(), runs);
  EXPECT_EQ(chooser.shapes_timed(), 1);
  EXPECT_EQ(chooser.choose(kOther, t.timer()), CpuGemmLibrary::OpenBlas);  // a new shape is
  EXPECT_EQ(chooser.shapes_timed(), 2);
  const std::vector<CpuGemmChoice> expected{{kLarge, CpuGemmLibrary::Onednn}, {kOther, CpuGemmLibrary::OpenBlas}};
  std::vector<CpuGemmChoice> sorted = expected;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.shape < b.shape; });
  EXPECT_EQ(chooser.choices(), sorted);
}

TEST(GemmChoice, ThreadsMeetingANewShapeAtOnceTimeItOnce) {
  GemmChooser chooser(true, CpuGemmPin::Auto);
  FakeTimer t;
  t.openblas = 3e-3;
  std::vector<std::thread> threads;
  std::vector<CpuGemmLibrary> got(8, CpuGemmLibrary::OpenBlas);
  for (size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] { got[i] = chooser.choose(kLarge, t.timer()); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(chooser.shapes_timed(), 1);
  for (CpuGemmLibrary g : got) EXPECT_EQ(g, CpuGemmLibrary::Onednn);
}

TEST(GemmChoice, TinyProductsAndBuildsWithoutOnednnStayOnOpenblasUntimed) {
  FakeTimer t;
  t.openblas = 9e-3;
  GemmChooser chooser(true, CpuGemmPin::Auto);
  EXPECT_EQ(chooser.choose(kTiny, t.timer()), CpuGemmLibrary::OpenBlas);
  GemmChooser without(false, CpuGemmPin::Auto);
  EXPECT_EQ(without.choose(kLarge, t.timer()), CpuGemmLibrary::OpenBlas);
  EXPECT_EQ(t.runs.load(), 0);
  // A table from a build with oneDNN, set in one without: OpenBLAS is all there is.
  without.set({{kOther, CpuGemmLibrary::Onednn}});
  EXPECT_EQ(without.chosen(kOther), CpuGemmLibrary::OpenBlas);
}

TEST(GemmChoice, APinSkipsTimingAndTheTable) {
  FakeTimer t;
  GemmChooser openblas(true, CpuGemmPin::OpenBlas), onednn(true, CpuGemmPin::Onednn);
  onednn.set({{kLarge, CpuGemmLibrary::OpenBlas}});
  EXPECT_EQ(openblas.choose(kLarge, t.timer()), CpuGemmLibrary::OpenBlas);
  EXPECT_EQ(onednn.choose(kLarge, t.timer()), CpuGemmLibrary::Onednn);
  EXPECT_EQ(onednn.choose(kTiny, t.timer()), CpuGemmLibrary::Onednn);
  EXPECT_EQ(t.runs.load(), 0);
}

TEST(GemmChoice, DpvGemmValuesAreCheckedWithAClearMessage) {
  EXPECT_EQ(cpu::parse_gemm_pin(nullptr, true), CpuGemmPin::Auto);
  EXPECT_EQ(cpu::parse_gemm_pin("", true), CpuGemmPin::Auto);
  EXPECT_EQ(cpu::parse_gemm_pin("auto", true), CpuGemmPin::Auto);
  EXPECT_EQ(cpu::parse_gemm_pin("openblas", false), CpuGemmPin::OpenBlas);
  EXPECT_EQ(cpu::parse_gemm_pin("onednn", true), CpuGemmPin::Onednn);
  expect_error_containing([] { cpu::parse_gemm_pin("OneDNN", true); },
                          {"DPV_GEMM='OneDNN' is not a GEMM library", "auto", "openblas or onednn"});
  expect_error_containing([] { cpu::parse_gemm_pin("onednn", false); }, {"this build has no oneDNN", "openblas"});
}

TEST(GemmChoice, TheTableRoundTripsThroughItsText) {
  const std::vector<CpuGemmChoice> choices{{kLarge, CpuGemmLibrary::Onednn},
                                           {{true, false, 7, 3, 1, false}, CpuGemmLibrary::OpenBlas}};
  const std::string text = cpu_gemm_choices_text(choices);
  EXPECT_EQ(text, "NT:256x1024x784:0=onednn;TN:7x3x1:1=openblas");
  EXPECT_EQ(parse_cpu_gemm_choices(text, "test"), choices);
  EXPECT_TRUE(parse_cpu_gemm_choices("", "test").empty());
  for (const std::string bad : {"XX:1x2x3:0=onednn", "NT:1x2:0=onednn", "NT:1x2x3:2=onednn", "NT:1x2x3:0=mkl",
                                "NT:1x2x3:0=onednn;;", "NT:-1x2x3:0=onednn", "NT:1x2x3:0"})
    expect_error_containing([&] { parse_cpu_gemm_choices(bad, "checkpoint.safetensors"); },
                            {"checkpoint.safetensors", "is not a GEMM choice"});
}

// Rank 0 times and publishes; rank 1 waits for rank 0's value and never times, even when its own
// timings would pick the other library.
TEST(GemmChoice, RankZerosChoiceWinsThroughTheStore) {
  std::map<std::string, std::string> store;
  auto publish = [&](const std::string& k, const std::string& v) { store[k] = v; };
  auto wait_for = [&](const std::string& k) { return store.at(k); };
  RankZeroGemmSharing rank0_sharing(0, publish, wait_for), rank1_sharing(1, publish, wait_for);
  GemmChooser rank0(true, CpuGemmPin::Auto), rank1(true, CpuGemmPin::Auto);
  rank0.set_sharing(&rank0_sharing);
  rank1.set_sharing(&rank1_sharing);
  FakeTimer fast_onednn, fast_openblas;
  fast_onednn.openblas = 4e-3;
  fast_openblas.onednn = 4e-3;
  EXPECT_EQ(rank0.choose(kLarge, fast_onednn.timer()), CpuGemmLibrary::Onednn);
  EXPECT_EQ(store.at("dpv/gemm/NT:256x1024x784:0"), "onednn");
  EXPECT_EQ(rank1.choose(kLarge, fast_openblas.timer()), CpuGemmLibrary::Onednn);
  EXPECT_EQ(fast_openblas.runs.load(), 0);
  EXPECT_EQ(rank1.choices(), rank0.choices());
  store["dpv/gemm/TN:1024x784x256:0"] = "fast";
  expect_error_containing([&] { rank1.choose(kOther, fast_openblas.timer()); },
                          {"rank 0's GEMM choice under key 'dpv/gemm/TN:1024x784x256:0'"});
}

// Each library alone gives the same product (to float32 rounding) for every transpose pair: the
// backend may run any shape with either.
TEST(GemmChoice, BothLibrariesComputeTheSameProduct) {
  CpuGemm gemm;
  const int64_t rows = 37, cols = 29, inner = 53;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      std::vector<double> va(rows * inner), vb(inner * cols);
      for (size_t i = 0; i < va.size(); ++i) va[i] = static_cast<double>((i * 7) % 13) / 13.0 - 0.5;
      for (size_t i = 0; i < vb.size(); ++i) vb[i] = static_cast<double>((i * 5) % 11) / 11.0 - 0.5;
      const Tensor a = Tensor::from_doubles(ta ? Shape{inner, rows} : Shape{rows, inner}, DType::Float32, va);
      const Tensor b = Tensor::from_doubles(tb ? Shape{cols, inner} : Shape{inner, cols}, DType::Float32, vb);
      Tensor by_openblas = Tensor::zeros({rows, cols}, DType::Float32), by_onednn = by_openblas.clone();
      gemm.run_with(CpuGemmLibrary::OpenBlas, ta, tb, rows, cols, inner, a, b, by_openblas);
      if (!cpu_has_onednn()) continue;
      gemm.run_with(CpuGemmLibrary::Onednn, ta, tb, rows, cols, inner, a, b, by_onednn);
      const std::vector<double> x = by_openblas.to_doubles(), y = by_onednn.to_doubles();
      for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], 1e-5) << "at " << i << (ta ? " trans_a" : "") << (tb ? " trans_b" : "");
    }
}

TEST(GemmChoice, TheBackendReportsTheLibraryItRanAShapeWith) {
  EXPECT_EQ(cpu_gemm_library(true, kLarge), "OpenBLAS dgemm");
  const CpuGemmShape shape{false, false, 64, 48, 40, true};
  const Shape a{64, 40}, b{40, 48}, c{64, 48};
  Tensor ta = Tensor::zeros(a, DType::Float32), tb = Tensor::zeros(b, DType::Float32), tc = Tensor::zeros(c, DType::Float32);
  CpuGemm gemm;
  gemm.run(false, false, 64, 48, 40, 1.0, ta, tb, 0.0, tc);
  const std::string name = cpu_gemm_library(false, shape);
  EXPECT_TRUE(name == "oneDNN sgemm" || name == "OpenBLAS sgemm") << name;
  if (cpu_gemm_pin() == CpuGemmPin::Auto && cpu_has_onednn()) {
    bool listed = false;
    for (const CpuGemmChoice& choice : cpu_gemm_choices())
      listed = listed || (choice.shape == shape && cpu_gemm_library_name(choice.library) == name);
    EXPECT_TRUE(listed);
  }
}

}  // namespace
}  // namespace dpv
