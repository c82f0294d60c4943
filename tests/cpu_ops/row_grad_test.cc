// cpu_ops/row_grad: the float32 backward kernels against float64 references of the same formulas, on fresh random
// inputs; outputs start as NaN so an element left unwritten fails.
#include "cpu_ops/row_grad.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace ot::cpu {
namespace {

std::vector<float> Random(size_t n, std::mt19937& rng, float scale = 1.f) {
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, double rel, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], rel * (std::fabs(want[i]) + 1e-3)) << what << " element " << i;
}

TEST(RowGrad, LayerNormGradMatchesFloat64WithAndWithoutSavedStatistics) {
  std::mt19937 rng(std::random_device{}());
  for (int64_t cols : {1, 7, 64, 300}) {
    const int64_t rows = 517;  // several blocks and a partial one
    const auto x = Random(rows * cols, rng, 2.f), dy = Random(rows * cols, rng);
    std::vector<double> s(cols);
    for (auto& v : s) v = std::normal_distribution<double>(1.0, 0.3)(rng);
    const double eps = 1e-5;
    std::vector<double> wdx(rows * cols), wds(cols, 0.0), wdb(cols, 0.0);
    // The size of the terms dx is the difference of, r (|g| + |mean g| + |xhat mean(g xhat)|): what an error in the
    // statistics is relative to (dx itself can be far smaller than its terms).
    std::vector<double> terms(rows * cols);
    std::vector<float> mean(rows), inv(rows);
    for (int64_t r = 0; r < rows; ++r) {
      double mu = 0, var = 0;
      for (int64_t j = 0; j < cols; ++j) mu += x[r * cols + j];
      mu /= cols;
      for (int64_t j = 0; j < cols; ++j) var += (x[r * cols + j] - mu) * (x[r * cols + j] - mu);
      const double ri = 1.0 / std::sqrt(var / cols + eps);
      mean[r] = static_cast<float>(mu);
      inv[r] = static_cast<float>(ri);
      double mg = 0, mgx = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const double xh = (x[r * cols + j] - mu) * ri, g = dy[r * cols + j] * s[j];
        mg += g / cols;
        mgx += g * xh / cols;
        wds[j] += dy[r * cols + j] * xh;
        wdb[j] += dy[r * cols + j];
      }
      for (int64_t j = 0; j < cols; ++j) {
        const double xh = (x[r * cols + j] - mu) * ri;
        wdx[r * cols + j] = ri * (dy[r * cols + j] * s[j] - mg - xh * mgx);
        terms[r * cols + j] = ri * (std::fabs(dy[r * cols + j] * s[j]) + std::fabs(mg) + std::fabs(xh * mgx));
      }
    }
    for (bool saved : {false, true}) {
      std::vector<float> dx(rows * cols, kNaN);
      std::vector<double> ds(cols, std::nan("")), db(cols, std::nan(""));
      LayerNormGradF32(rows, cols, dy.data(), x.data(), s.data(), saved ? mean.data() : nullptr,
                       saved ? inv.data() : nullptr, eps, dx.data(), ds.data(), db.data());
      if (saved) {
        // Saved statistics are float32 (the forward's outputs): their rounding moves dx by a few ulp of its terms,
        // which can be far more than a few ulp of dx where the terms cancel.
        for (size_t i = 0; i < dx.size(); ++i)
          ASSERT_NEAR(dx[i], wdx[i], 1e-5 * terms[i] + 1e-9) << "dx element " << i << " (saved statistics)";
      } else {
        ExpectClose(dx, wdx, 2e-6, "dx");  // float32 output: rounded once
      }
      for (int64_t j = 0; j < cols; ++j) {
        EXPECT_NEAR(ds[j], wds[j], (saved ? 1e-5 : 1e-9) * (std::fabs(wds[j]) + 1)) << "dscale " << j;
        EXPECT_NEAR(db[j], wdb[j], 1e-9 * (std::fabs(wdb[j]) + 1)) << "dbias " << j;
      }
    }
    // dx in place of dy gives the same bits.
    std::vector<float> a(rows * cols, kNaN), b = dy;
    std::vector<double> ds(cols), db(cols);
    LayerNormGradF32(rows, cols, dy.data(), x.data(), s.data(), nullptr, nullptr, eps, a.data(), ds.data(), db.data());
    LayerNormGradF32(rows, cols, b.data(), x.data(), s.data(), nullptr, nullptr, eps, b.data(), ds.data(), db.data());
    EXPECT_EQ(a, b) << "cols " << cols;
  }
}

// The kernel takes float steps (the fused cluster's): p = fl(dy y), s = fl(sum p), dx = fl(y fl(dy - s)). With
// u = 2^-24 the error is at most u |y| (2 |dy| + 4 A), A = sum |dy y| over the row (the products' rounding, s's
// rounding, the subtraction's and the product's): bounded below by 4 u |y| (|dy| + A). dx itself can be far smaller
// than these terms when dy is close to s.
TEST(RowGrad, SoftmaxGradMatchesFloat64) {
  std::mt19937 rng(std::random_device{}());
  const double u = std::ldexp(1.0, -24);
  for (int64_t len : {1, 5, 32, 258, 1000}) {
    const int64_t rows = 301;
    const auto dy = Random(rows * len, rng);
    auto y = Random(rows * len, rng);
    for (auto& v : y) v = std::fabs(v) / 4;
    std::vector<double> want(rows * len), bound(rows * len);
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0, a = 0;
      for (int64_t j = 0; j < len; ++j) {
        s += static_cast<double>(dy[r * len + j]) * y[r * len + j];
        a += std::fabs(static_cast<double>(dy[r * len + j]) * y[r * len + j]);
      }
      for (int64_t j = 0; j < len; ++j) {
        want[r * len + j] = y[r * len + j] * (dy[r * len + j] - s);
        bound[r * len + j] = 4 * u * y[r * len + j] * (std::fabs(dy[r * len + j]) + a);
      }
    }
    std::vector<float> dx(rows * len, kNaN);
    SoftmaxGradF32(rows, len, dy.data(), y.data(), dx.data());
    int over = 0;
    double worst = 0;  // the largest error as a fraction of its bound (a kernel in double would be near 0)
    for (size_t i = 0; i < dx.size(); ++i) {
      ASSERT_FALSE(std::isnan(dx[i])) << "dx element " << i << " not written (len " << len << ")";
      const double e = std::fabs(dx[i] - want[i]);
      if (e > bound[i]) ++over;
      if (bound[i] > 0) worst = std::max(worst, e / bound[i]);
    }
    EXPECT_EQ(over, 0) << "len " << len << ": worst error " << worst << " of the bound";
  }
}

// Reference: softmax over classes in float64, (p - onehot) f, exactly 0 where f == 0.
std::vector<double> SceGradRef(int64_t n, int64_t c, int64_t d, const std::vector<float>& x,
                               const std::vector<int64_t>& t, const std::vector<double>& f) {
  std::vector<double> out(n * c * d);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) {
      double m = -INFINITY, s = 0;
      for (int64_t k = 0; k < c; ++k) m = std::max<double>(m, x[(i * c + k) * d + j]);
      for (int64_t k = 0; k < c; ++k) s += std::exp(x[(i * c + k) * d + j] - m);
      for (int64_t k = 0; k < c; ++k) {
        const double p = std::exp(x[(i * c + k) * d + j] - m) / s, fj = f[i * d + j];
        out[(i * c + k) * d + j] = fj == 0 ? 0.0 : (p - (k == t[i * d + j])) * fj;
      }
    }
  return out;
}

TEST(RowGrad, SoftmaxCrossEntropyGradMatchesFloat64RowsAndColumns) {
  std::mt19937 rng(std::random_device{}());
  struct Case {
    int64_t n, c, d;
  };
  for (Case cs : {Case{33, 10, 1}, Case{5, 64, 1}, Case{4, 7, 3}, Case{3, 64, 130}}) {
    const auto x = Random(cs.n * cs.c * cs.d, rng, 3.f);
    std::vector<int64_t> t(cs.n * cs.d);
    std::vector<int32_t> t32(t.size());
    std::vector<double> f(t.size());
    for (size_t i = 0; i < t.size(); ++i) {
      t[i] = std::uniform_int_distribution<int64_t>(0, cs.c - 1)(rng);
      t32[i] = static_cast<int32_t>(t[i]);
      // Every seventh position ignored (f == 0, its target out of range: it must not be read).
      f[i] = i % 7 == 3 ? 0.0 : std::uniform_real_distribution<double>(0.1, 2.0)(rng);
      if (f[i] == 0.0) t[i] = t32[i] = -100;
    }
    const auto want = SceGradRef(cs.n, cs.c, cs.d, x, t, f);
    std::vector<float> dx(x.size(), kNaN), dx32(x.size(), kNaN);
    SoftmaxCrossEntropyGradF32(cs.n, cs.c, cs.d, x.data(), t.data(), f.data(), dx.data());
    SoftmaxCrossEntropyGradF32(cs.n, cs.c, cs.d, x.data(), t32.data(), f.data(), dx32.data());
    ExpectClose(dx, want, 2e-6, "dx");
    EXPECT_EQ(dx, dx32) << "int32 and int64 targets differ";
    for (size_t i = 0; i < want.size(); ++i) {
      if (want[i] == 0.0) {
        ASSERT_EQ(dx[i], 0.f) << "ignored position " << i << " is not exactly 0";
      }
    }
  }
}

// The half-output rows: each element the float kernel's, rounded once (the bits a Cast of its output gives); ignored
// rows exactly 0; every element written (dx starts as NaN).
TEST(RowGrad, SoftmaxCrossEntropyGradRowsToHalfRoundTheFloatRows) {
  std::mt19937 rng(std::random_device{}());
  for (int64_t c : {1, 9, 300, 8192}) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 37);
    const auto x = Random(n * c, rng, 4.f);
    std::vector<int64_t> t(n);
    std::vector<double> f(n);
    for (int64_t i = 0; i < n; ++i) {
      t[i] = std::uniform_int_distribution<int64_t>(0, c - 1)(rng);
      f[i] = i % 5 == 2 ? 0.0 : std::uniform_real_distribution<double>(-3.0, 3.0)(rng);
      if (f[i] == 0.0) t[i] = -1;
    }
    std::vector<float> want(x.size(), kNaN);
    SoftmaxCrossEntropyGradF32(n, c, 1, x.data(), t.data(), f.data(), want.data());
    std::vector<bfloat16> bf(x.size(), bfloat16(kNaN));
    std::vector<float16> hf(x.size(), float16(kNaN));
    SoftmaxCrossEntropyGradRowsToHalf(n, c, x.data(), t.data(), f.data(), bf.data());
    SoftmaxCrossEntropyGradRowsToHalf(n, c, x.data(), t.data(), f.data(), hf.data());
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(bf[i].bits, bfloat16(want[i]).bits) << "c " << c << " element " << i;
      ASSERT_EQ(hf[i].bits, float16(want[i]).bits) << "c " << c << " element " << i;
    }
  }
}

TEST(RowGrad, SoftmaxCrossEntropyGradIgnoredPositionIsZeroEvenForInfiniteScores) {
  std::vector<float> x = {1.f, 0.5f, INFINITY, 0.25f, -2.f, 3.f};  // [1, 3, 2]: column 0 holds an inf
  const std::vector<int64_t> t = {-1, 2};
  const std::vector<double> f = {0.0, 1.0};
  std::vector<float> dx(6, kNaN);
  SoftmaxCrossEntropyGradF32<int64_t>(1, 3, 2, x.data(), t.data(), f.data(), dx.data());
  EXPECT_EQ(dx[0], 0.f);
  EXPECT_EQ(dx[2], 0.f);
  EXPECT_EQ(dx[4], 0.f);
  const double e0 = std::exp(-2.5), e1 = std::exp(-2.75), e2 = 1.0, s = e0 + e1 + e2;
  EXPECT_NEAR(dx[1], e0 / s, 1e-6);
  EXPECT_NEAR(dx[3], e1 / s, 1e-6);
  EXPECT_NEAR(dx[5], e2 / s - 1.0, 1e-6);
}

}  // namespace
}  // namespace ot::cpu
