// kernels/math/indexing.h on the CPU: the index helpers the im2col, col2im and permute kernels
// use, checked element by element against the CPU backend, and grid-stride loops simulated on the
// CPU for grids small enough that every thread takes a second (and third) trip.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/tensor.h"
#include "kernels/math/indexing.h"

namespace dpv {
namespace {

namespace math = kernels::math;

math::ConvShape geometry(int64_t N, int64_t C, int64_t H, int64_t W, int64_t k, int64_t stride, int64_t pad) {
  return {N, C, H, W, k, k, stride, pad, (H + 2 * pad - k) / stride + 1, (W + 2 * pad - k) / stride + 1};
}

std::vector<double> iota(int64_t n, double start = 1.0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<double>(i);
  return v;
}

// Geometries with padding wider than the kernel's reach, strides that skip pixels, 1x1 kernels
// and a kernel as large as the padded input.
const math::ConvShape kGeometries[] = {
    geometry(2, 3, 5, 7, 3, 1, 1), geometry(1, 2, 6, 6, 3, 2, 1), geometry(2, 1, 7, 5, 3, 3, 2),
    geometry(1, 4, 4, 4, 1, 1, 0), geometry(1, 1, 3, 3, 5, 1, 1), geometry(3, 2, 8, 3, 2, 2, 0)};

TEST(IndexingMath, Im2colSourceMatchesTheCpuBackend) {
  auto cpu = make_cpu_backend();
  for (const math::ConvShape& g : kGeometries) {
    const int64_t xn = g.N * g.C * g.H * g.W, cn = g.N * g.C * g.kh * g.kw * g.OH * g.OW;
    const std::vector<double> x = iota(xn);  // every pixel distinct, never 0
    Tensor col = Tensor::empty({cn}, DType::Float64);
    cpu->im2col(Tensor::from_doubles({xn}, DType::Float64, x), col, g);
    const std::vector<double> want = col.to_doubles();
    for (int64_t i = 0; i < cn; ++i) {
      const int64_t src = math::im2col_source(i, g);
      ASSERT_GE(src, -1);
      ASSERT_LT(src, xn);
      ASSERT_EQ(src >= 0 ? x[static_cast<size_t>(src)] : 0.0, want[static_cast<size_t>(i)])
          << "col element " << i << " of geometry N" << g.N << " C" << g.C << " " << g.H << "x" << g.W << " k" << g.kh
          << " s" << g.stride << " p" << g.pad;
    }
  }
}

TEST(IndexingMath, Col2imGatherMatchesTheCpuBackendsScatter) {
  auto cpu = make_cpu_backend();
  for (const math::ConvShape& g : kGeometries) {
    const int64_t xn = g.N * g.C * g.H * g.W, cn = g.N * g.C * g.kh * g.kw * g.OH * g.OW;
    const std::vector<double> col = iota(cn, 0.5);
    Tensor dx = Tensor::full({xn}, DType::Float64, 99.0);
    cpu->col2im(Tensor::from_doubles({cn}, DType::Float64, col), dx, g);
    const std::vector<double> want = dx.to_doubles();
    for (int64_t i = 0; i < xn; ++i) {
      double sum = 0;  // the kernel's gather, taps ki then kj ascending
      for (int64_t ki = 0; ki < g.kh; ++ki)
        for (int64_t kj = 0; kj < g.kw; ++kj) {
          const int64_t src = math::col2im_source(i, ki, kj, g);
          ASSERT_LT(src, cn);
          if (src >= 0) sum += col[static_cast<size_t>(src)];
        }
      ASSERT_EQ(sum, want[static_cast<size_t>(i)]) << "dx element " << i;
    }
  }
}

TEST(IndexingMath, ConvOutputCoordInvertsConvInputCoord) {
  for (int64_t stride : {1, 2, 3})
    for (int64_t pad : {0, 1, 2})
      for (int64_t k = 0; k < 3; ++k)
        for (int64_t out = 0; out < 6; ++out) {
          const int64_t in = math::conv_input_coord(out, k, stride, pad);
          if (in >= 0) {
            EXPECT_EQ(math::conv_output_coord(in, k, stride, pad, 6), out);
          }
        }
  EXPECT_EQ(math::conv_output_coord(1, 0, 2, 0, 6), -1) << "stride 2 skips odd pixels at tap 0";
  EXPECT_EQ(math::conv_output_coord(12, 0, 2, 0, 6), -1) << "past the last output";
}

TEST(IndexingMath, PermuteSourceMatchesTheCpuBackend) {
  auto cpu = make_cpu_backend();
  for (auto [A, B, S] : {std::tuple<int64_t, int64_t, int64_t>{5, 6, 11}, {1, 4, 3}, {4, 1, 2}, {3, 3, 1}}) {
    const std::vector<double> src = iota(A * B * S);
    Tensor dst = Tensor::empty({B, A, S}, DType::Float64);
    cpu->permute_nos(Tensor::from_doubles({A, B, S}, DType::Float64, src), dst, A, B, S);
    const std::vector<double> want = dst.to_doubles();
    for (int64_t i = 0; i < A * B * S; ++i)
      ASSERT_EQ(src[static_cast<size_t>(math::permute_source(i, A, B, S))], want[static_cast<size_t>(i)]) << i;
  }
}

TEST(IndexingMath, GridBlocksAreCappedAndNeverZero) {
  EXPECT_EQ(math::grid_blocks(0, 256, 8448), 1) << "an empty launch still has one block";
  EXPECT_EQ(math::grid_blocks(1, 256, 8448), 1);
  EXPECT_EQ(math::grid_blocks(257, 256, 8448), 2);
  EXPECT_EQ(math::grid_blocks(int64_t{1} << 40, 256, 132 * 64), 132 * 64);
  EXPECT_EQ(math::grid_blocks(int64_t{1} << 40, 256, 78 * 64), 78 * 64) << "the cap follows the GPU's SM count";
}

// Runs a grid of `blocks` x `threads` as the kernels do (math::grid_stride from each thread's
// global index) and checks every element is visited exactly once; returns the most trips any
// thread made.
int64_t simulate_grid(int64_t n, int64_t threads, int64_t max_blocks) {
  const int64_t blocks = math::grid_blocks(n, threads, max_blocks);
  const int64_t grid = blocks * threads;
  std::vector<int> visits(static_cast<size_t>(n), 0);
  int64_t most_trips = 0;
  for (int64_t t = 0; t < grid; ++t) {
    int64_t trips = 0;
    math::grid_stride(t, grid, n, [&](int64_t i) {
      ++visits[static_cast<size_t>(i)];
      ++trips;
    });
    most_trips = std::max(most_trips, trips);
  }
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(visits[static_cast<size_t>(i)], 1) << "element " << i << " of " << n;
  return most_trips;
}

TEST(IndexingMath, GridStrideLoopsVisitEveryElementOnceAcrossTrips) {
  // A grid capped at 2 blocks of 32 threads (a GPU of 1 SM with 2 blocks each, in miniature).
  EXPECT_EQ(simulate_grid(0, 32, 2), 0);
  EXPECT_EQ(simulate_grid(1, 32, 2), 1);
  EXPECT_EQ(simulate_grid(64, 32, 2), 1) << "exactly one full grid: one trip";
  EXPECT_EQ(simulate_grid(65, 32, 2), 2) << "one element past the grid: a second trip";
  EXPECT_EQ(simulate_grid(64 * 3 + 5, 32, 2), 4);
  // The kernels' real shape: 256 threads, the cap of a 2-SM GPU, a tensor of 3.5 grids.
  EXPECT_EQ(simulate_grid(2 * 64 * 256 * 7 / 2, 256, 2 * 64), 4);
}

}  // namespace
}  // namespace dpv
