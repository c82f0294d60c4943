// cpu_ops/row_sum.h's RowSums and cpu_ops/row_stats.h's StatsOfRowRange: rows taken four at a time with their
// chains interleaved must give each row the bits it gets alone (the fused softmax equals the unfused kernels, and
// LayerNormGrad recomputes the forward's statistics, only while that holds), and the values must be right.
#include "cpu_ops/row_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cpu_ops/norm.h"
#include "cpu_ops/row_sum.h"

namespace ot::cpu {
namespace {

std::vector<float> Random(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.5f, 3.f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// Floats over a wide exponent range, so that their double sums round and the order of the additions shows in the
// bits (sums of floats of one magnitude are exact in double, in any order).
std::vector<float> WideRandom(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> e(-40, 40);
  std::vector<float> v(n);
  for (auto& x : v) x = std::ldexp(nd(rng), e(rng));
  return v;
}

TEST(RowSums, InterleavedRowsGiveEachRowItsOwnSumBits) {
  std::mt19937 rng(std::random_device{}());
  for (int64_t n : {1, 3, 4, 5, 8, 32, 33, 257}) {
    for (int64_t rows : {1, 3, 4, 5, 8, 9}) {
      const int64_t stride = n + 3;  // rows not packed: the stride is honoured
      const auto x = WideRandom(static_cast<size_t>(rows * stride), rng);
      std::vector<double> got(static_cast<size_t>(rows), std::nan(""));
      RowSums(x.data(), rows, stride, n, got.data());
      for (int64_t r = 0; r < rows; ++r) {
        const double alone = RowSum(x.data() + r * stride, n);
        EXPECT_EQ(std::memcmp(&got[r], &alone, sizeof alone), 0) << "n " << n << " rows " << rows << " row " << r;
        long double exact = 0, mag = 0;
        for (int64_t j = 0; j < n; ++j) {
          exact += x[r * stride + j];
          mag += std::fabs(x[r * stride + j]);
        }
        // Double sums of floats: n roundings of at most 2^-53 of the running magnitude.
        EXPECT_NEAR(got[r], static_cast<double>(exact), static_cast<double>(mag) * n * 0x1p-53) << "n " << n;
      }
    }
  }
}

TEST(RowStats, EveryGroupingGivesARowTheSameStatistics) {
  std::mt19937 rng(std::random_device{}());
  const double eps = 1e-5;
  for (int64_t cols : {1, 7, 8, 9, 64, 100}) {
    const int64_t rows = 11;
    auto x = Random(static_cast<size_t>(rows * cols), rng);
    for (size_t i = 0; i < x.size(); i += 3) x[i] = std::ldexp(x[i], -30);  // sums that round: the order shows
    // All rows from 0, and the same rows from offsets 1, 2, 3 (so each row falls in another group of four or in
    // the one-at-a-time tail).
    std::vector<double> mu0(rows), r0(rows);
    row_stats::StatsOfRowRange(x.data(), cols, 0, rows, eps, mu0.data(), r0.data());
    for (int64_t off = 1; off <= 3; ++off) {
      std::vector<double> mu(rows), ri(rows);
      row_stats::StatsOfRowRange(x.data(), cols, off, rows, eps, mu.data(), ri.data());
      for (int64_t r = off; r < rows; ++r) {
        EXPECT_EQ(std::memcmp(&mu[r - off], &mu0[r], sizeof(double)), 0) << "cols " << cols << " row " << r;
        EXPECT_EQ(std::memcmp(&ri[r - off], &r0[r], sizeof(double)), 0) << "cols " << cols << " row " << r;
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      long double m = 0, v = 0;
      for (int64_t j = 0; j < cols; ++j) m += x[r * cols + j];
      m /= cols;
      for (int64_t j = 0; j < cols; ++j) v += (x[r * cols + j] - m) * (x[r * cols + j] - m);
      const double want_r = static_cast<double>(1 / std::sqrt(v / cols + eps));
      EXPECT_NEAR(mu0[r], static_cast<double>(m), 1e-13 * (std::fabs(static_cast<double>(m)) + 3)) << "cols " << cols;
      EXPECT_NEAR(r0[r], want_r, 1e-12 * want_r) << "cols " << cols;
    }
    // The forward kernel normalizes with these statistics: its Mean/InvStdDev outputs are them rounded to float.
    std::vector<float> scale(cols, 1.f), y(x.size()), mean(rows), inv(rows);
    LayerNorm<float>(rows, cols, x.data(), scale.data(), nullptr, {}, {}, eps, y.data(), mean.data(), inv.data());
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(mean[r], static_cast<float>(mu0[r])) << "cols " << cols << " row " << r;
      EXPECT_EQ(inv[r], static_cast<float>(r0[r])) << "cols " << cols << " row " << r;
    }
  }
}

}  // namespace
}  // namespace ot::cpu
