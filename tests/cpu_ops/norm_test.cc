// cpu_ops normalisations against naive double references: batch norm (inference and batch statistics),
// layer norm (with broadcast parameters and statistics outputs), instance norm, MVN, Lp norm.
#include "cpu_ops/norm.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernel_common/half.h"

namespace ot::cpu {
namespace {

std::vector<float> Rand(int64_t n, uint64_t seed, double lo = -2, double hi = 2) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(u(g));
  return v;
}

// Mean and biased variance of channel c of x [N, C, S] in float64, two passes (the reference).
std::pair<double, double> TwoPassMoments(const std::vector<float>& x, int64_t N, int64_t C, int64_t S, int64_t c) {
  double s = 0, s2 = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < S; ++j) s += x[(n * C + c) * S + j];
  const double m = s / static_cast<double>(N * S);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < S; ++j) s2 += std::pow(x[(n * C + c) * S + j] - m, 2);
  return {m, s2 / static_cast<double>(N * S)};
}

TEST(CpuNorm, BatchNormInferenceAndTrainingStatistics) {
  const int64_t N = 3, C = 4, S = 5;
  std::vector<float> x = Rand(N * C * S, 1);
  std::vector<double> scale = {0.5, 1, 2, -1}, bias = {0, 1, -1, 0.25}, mean = {0.1, -0.2, 0.3, 0},
                      var = {1, 2, 0.5, 3};
  std::vector<float> y(x.size());
  BatchNormApply<float>(N, C, S, x.data(), scale.data(), bias.data(), mean.data(), var.data(), 1e-5, y.data());
  for (int64_t i = 0; i < N * C * S; ++i) {
    const int64_t c = (i / S) % C;
    const double e = (x[i] - mean[c]) / std::sqrt(var[c] + 1e-5) * scale[c] + bias[c];
    ASSERT_NEAR(y[i], e, 1e-5);
  }
  std::vector<double> bm(C), bv(C);
  ChannelMoments<float>(N, C, S, x.data(), bm.data(), bv.data());
  for (int64_t c = 0; c < C; ++c) {
    const auto [m, v] = TwoPassMoments(x, N, C, S, c);
    EXPECT_NEAR(bm[c], m, 1e-12);
    EXPECT_NEAR(bv[c], v, 1e-12);
  }
}

// The batch statistics in one pass stay exact where a plain sum of squares would cancel: channels of mean 1000 and
// standard deviation 1e-2 (E[x^2] - E[x]^2 in double loses ~10 of its 16 digits there), odd plane sizes (vector
// tails), against a two-pass float64 reference.
TEST(CpuNorm, BatchNormStatisticsOfOffsetChannels) {
  const int64_t N = 3, C = 3, S = 37;
  std::vector<float> x = Rand(N * C * S, 7, -1, 1);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1000.f + 0.01f * x[i] + 100.f * static_cast<float>((i / S) % C);
  std::vector<double> bm(C), bv(C);
  ChannelMoments<float>(N, C, S, x.data(), bm.data(), bv.data());
  for (int64_t c = 0; c < C; ++c) {
    const auto [m, v] = TwoPassMoments(x, N, C, S, c);
    EXPECT_NEAR(bm[c], m, 1e-12 * std::fabs(m));
    EXPECT_NEAR(bv[c], v, 1e-9 * v) << "channel " << c;
  }
}

// BatchNormGrad against a float64 reference on fresh random inputs, training (batch statistics) and inference
// (given mean/var), with odd spatial sizes (vector-lane tails) and a channel offset from zero; every dX element is
// written (sentinel) and the results are the same bit for bit with one thread and with the default arena.
TEST(CpuNorm, BatchNormGradMatchesFloat64ReferenceAndThreadCount) {
  for (const auto& [N, C, S] : {std::tuple<int64_t, int64_t, int64_t>{3, 5, 37}, {2, 3, 1}, {4, 2, 129}, {1, 7, 8}}) {
    std::vector<float> x = Rand(N * C * S, 100 + S, -1.5, 3.5), dy = Rand(N * C * S, 200 + S);
    std::vector<double> scale(C), rmean(C), rvar(C);
    for (int64_t c = 0; c < C; ++c) scale[c] = 0.5 + 0.25 * c, rmean[c] = 0.1 * c - 0.2, rvar[c] = 0.5 + 0.3 * c;
    for (bool training : {true, false}) {
      const double eps = 1e-5, cnt = static_cast<double>(N * S);
      std::vector<float> dx(x.size(), -777.f);
      std::vector<double> ds(C, -777), db(C, -777);
      BatchNormGrad<float>(N, C, S, dy.data(), x.data(), scale.data(), training ? nullptr : rmean.data(),
                           training ? nullptr : rvar.data(), eps, dx.data(), ds.data(), db.data());
      for (int64_t c = 0; c < C; ++c) {
        auto at = [&](int64_t n, int64_t j) { return (n * C + c) * S + j; };
        double mu = rmean[c], var = rvar[c];
        if (training) {
          mu = 0, var = 0;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t j = 0; j < S; ++j) mu += x[at(n, j)];
          mu /= cnt;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t j = 0; j < S; ++j) var += (x[at(n, j)] - mu) * (x[at(n, j)] - mu);
          var /= cnt;
        }
        const double r = 1 / std::sqrt(var + eps);
        double sb = 0, ss = 0;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t j = 0; j < S; ++j) {
            sb += dy[at(n, j)];
            ss += dy[at(n, j)] * (x[at(n, j)] - mu) * r;
          }
        EXPECT_NEAR(db[c], sb, 1e-10 * (1 + std::fabs(sb)));
        EXPECT_NEAR(ds[c], ss, 1e-10 * (1 + std::fabs(ss)));
        for (int64_t n = 0; n < N; ++n)
          for (int64_t j = 0; j < S; ++j) {
            const double xh = (x[at(n, j)] - mu) * r;
            const double e =
                training ? scale[c] * r * (dy[at(n, j)] - sb / cnt - xh * ss / cnt) : scale[c] * r * dy[at(n, j)];
            ASSERT_NEAR(dx[at(n, j)], e, 1e-5 * (1 + std::fabs(e))) << "c " << c << " n " << n << " j " << j;
          }
      }
      std::vector<float> dx1(x.size(), -777.f);
      std::vector<double> ds1(C), db1(C);
      {
        tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
        BatchNormGrad<float>(N, C, S, dy.data(), x.data(), scale.data(), training ? nullptr : rmean.data(),
                             training ? nullptr : rvar.data(), eps, dx1.data(), ds1.data(), db1.data());
      }
      EXPECT_EQ(std::memcmp(dx.data(), dx1.data(), dx.size() * sizeof(float)), 0);
      EXPECT_EQ(ds, ds1);
      EXPECT_EQ(db, db1);
    }
  }
}

// Half planes (float16, bfloat16): BatchNormGrad against a float64 reference on the same half values, training and
// inference, with and without the folded Relu mask (a NaN dY where R <= 0 must give what ReluGrad's 0 gives), odd
// plane sizes (vector tails). dX is rounded once from the double: within half an ulp of the reference (plus the
// double's own error), every element written (a NaN sentinel), and the same bits with one thread.
template <typename T>
void CheckHalfBatchNormGrad() {
  constexpr int kBits = std::is_same_v<T, bfloat16> ? 7 : 10;  // explicit mantissa bits
  auto half = [](const std::vector<float>& v) {
    std::vector<T> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = T(v[i]);
    return h;
  };
  for (const auto& [N, C, S] : {std::tuple<int64_t, int64_t, int64_t>{3, 5, 37}, {2, 3, 1}, {4, 2, 129}, {1, 7, 8}}) {
    std::vector<float> xf = Rand(N * C * S, 300 + S, -1.5, 3.5);
    for (size_t i = 0; i < xf.size(); ++i) xf[i] += 4.f * static_cast<float>((i / S) % C);  // offset channels
    const std::vector<T> x = half(xf), dy0 = half(Rand(N * C * S, 400 + S));
    std::vector<T> r = half(Rand(N * C * S, 500 + S));
    const float inf = std::numeric_limits<float>::infinity();
    const float edges[] = {0.f, -0.f, std::numeric_limits<float>::quiet_NaN(), inf, -inf, 1e-30f};  // mask edges
    for (size_t i = 0; i < std::size(edges) && 3 * i < r.size(); ++i) r[3 * i] = T(edges[i]);
    if (r.size() > 20) r[20] = T::FromBits(std::is_same_v<T, bfloat16> ? 0x7f81 : 0x7c01);  // the smallest NaN
    std::vector<double> scale(C), rmean(C), rvar(C);
    for (int64_t c = 0; c < C; ++c) scale[c] = 0.5 + 0.25 * c, rmean[c] = 4.0 * c + 0.1, rvar[c] = 0.5 + 0.3 * c;
    for (bool masked : {false, true}) {
      std::vector<T> dy = dy0;
      if (masked)  // dY is NaN where the mask drops it
        for (size_t i = 0; i < dy.size(); ++i)
          if (!(static_cast<float>(r[i]) > 0)) dy[i] = T(std::numeric_limits<float>::quiet_NaN());
      for (bool training : {true, false}) {
        const double eps = 1e-5, cnt = static_cast<double>(N * S);
        std::vector<T> dx(x.size(), T(std::numeric_limits<float>::quiet_NaN()));
        std::vector<double> ds(C, -777), db(C, -777);
        auto run = [&](std::vector<T>& out, std::vector<double>& dsc, std::vector<double>& dbi) {
          BatchNormGrad<T>(N, C, S, dy.data(), x.data(), scale.data(), training ? nullptr : rmean.data(),
                           training ? nullptr : rvar.data(), eps, out.data(), dsc.data(), dbi.data(),
                           masked ? r.data() : nullptr);
        };
        run(dx, ds, db);
        auto g = [&](size_t i) {
          return masked && !(static_cast<float>(r[i]) > 0) ? 0.0 : static_cast<double>(static_cast<float>(dy[i]));
        };
        for (int64_t c = 0; c < C; ++c) {
          auto at = [&](int64_t n, int64_t j) { return static_cast<size_t>((n * C + c) * S + j); };
          auto xv = [&](int64_t n, int64_t j) { return static_cast<double>(static_cast<float>(x[at(n, j)])); };
          double mu = rmean[c], var = rvar[c];
          if (training) {
            mu = 0, var = 0;
            for (int64_t n = 0; n < N; ++n)
              for (int64_t j = 0; j < S; ++j) mu += xv(n, j);
            mu /= cnt;
            for (int64_t n = 0; n < N; ++n)
              for (int64_t j = 0; j < S; ++j) var += (xv(n, j) - mu) * (xv(n, j) - mu);
            var /= cnt;
          }
          const double rs = 1 / std::sqrt(var + eps);
          double sb = 0, ss = 0;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t j = 0; j < S; ++j) {
              sb += g(at(n, j));
              ss += g(at(n, j)) * (xv(n, j) - mu) * rs;
            }
          EXPECT_NEAR(db[c], sb, 1e-10 * (1 + std::fabs(sb)));
          EXPECT_NEAR(ds[c], ss, 1e-10 * (1 + std::fabs(ss)));
          for (int64_t n = 0; n < N; ++n)
            for (int64_t j = 0; j < S; ++j) {
              const double xh = (xv(n, j) - mu) * rs, gv = g(at(n, j));
              const double e = training ? scale[c] * rs * (gv - sb / cnt - xh * ss / cnt) : scale[c] * rs * gv;
              int ex = 0;
              std::frexp(e, &ex);
              const double ulp = std::ldexp(1.0, std::max(ex - 1 - kBits, kBits == 10 ? -24 : -133));
              const double got = static_cast<float>(dx[at(n, j)]);
              ASSERT_LE(std::fabs(got - e), 0.5 * ulp * (1 + 1e-6))
                  << "c " << c << " n " << n << " j " << j << " training " << training << " masked " << masked;
            }
        }
        std::vector<T> dx1(x.size(), T(0.f));
        std::vector<double> ds1(C), db1(C);
        {
          tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
          run(dx1, ds1, db1);
        }
        EXPECT_EQ(std::memcmp(dx.data(), dx1.data(), dx.size() * sizeof(T)), 0);
        EXPECT_EQ(ds, ds1);
        EXPECT_EQ(db, db1);
      }
    }
  }
}

TEST(CpuNorm, HalfBatchNormGradMatchesFloat64Reference) {
  CheckHalfBatchNormGrad<bfloat16>();
  CheckHalfBatchNormGrad<float16>();
}

TEST(CpuNorm, LayerNormWithBroadcastScaleAndStatistics) {
  const int64_t rows = 6, cols = 12;  // normalized dims [3, 4]; scale [4] broadcast, bias [3, 4]
  std::vector<float> x = Rand(rows * cols, 2), scale = Rand(4, 3), bias = Rand(cols, 4);
  std::vector<int64_t> sidx(cols);
  for (int64_t j = 0; j < cols; ++j) sidx[j] = j % 4;
  std::vector<float> y(x.size()), mean(rows), inv(rows);
  LayerNorm<float>(rows, cols, x.data(), scale.data(), bias.data(), sidx, {}, 1e-5, y.data(), mean.data(), inv.data());
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < cols; ++j) m += x[r * cols + j];
    m /= cols;
    for (int64_t j = 0; j < cols; ++j) v += std::pow(x[r * cols + j] - m, 2);
    v /= cols;
    const double is = 1 / std::sqrt(v + 1e-5);
    EXPECT_NEAR(mean[r], m, 1e-6);
    EXPECT_NEAR(inv[r], is, 1e-5 * is);
    for (int64_t j = 0; j < cols; ++j)
      ASSERT_NEAR(y[r * cols + j], (x[r * cols + j] - m) * is * scale[j % 4] + bias[j], 1e-5);
  }
}

TEST(CpuNorm, InstanceNormPerSampleAndChannel) {
  const int64_t N = 2, C = 3, S = 10;
  std::vector<float> x = Rand(N * C * S, 5), scale = Rand(C, 6), bias = Rand(C, 7), y(x.size());
  InstanceNorm<float>(N, C, S, x.data(), scale.data(), bias.data(), 1e-3, y.data());
  for (int64_t nc = 0; nc < N * C; ++nc) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < S; ++j) m += x[nc * S + j];
    m /= S;
    for (int64_t j = 0; j < S; ++j) v += std::pow(x[nc * S + j] - m, 2);
    v /= S;
    for (int64_t j = 0; j < S; ++j)
      ASSERT_NEAR(y[nc * S + j], (x[nc * S + j] - m) / std::sqrt(v + 1e-3) * scale[nc % C] + bias[nc % C], 1e-5);
  }
}

TEST(CpuNorm, MeanVarianceNormOverAxes023) {
  const std::vector<int64_t> dims = {2, 3, 2, 4};
  std::vector<float> x = Rand(48, 8), y(48);
  MeanVarianceNorm<float>(dims, {true, false, true, true}, x.data(), y.data());
  for (int64_t c = 0; c < 3; ++c) {
    double s = 0, s2 = 0;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t j = 0; j < 8; ++j) {
        const double v = x[(n * 3 + c) * 8 + j];
        s += v;
        s2 += v * v;
      }
    const double m = s / 16, sd = std::sqrt(s2 / 16 - m * m);
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t j = 0; j < 8; ++j) {
        const int64_t i = (n * 3 + c) * 8 + j;
        ASSERT_NEAR(y[i], (x[i] - m) / (sd + 1e-9), 1e-5);
      }
  }
}

TEST(CpuNorm, LpNormP1P2AndZeroVector) {
  std::vector<float> x = {3, 0, 4, 0, 0, 0}, y(6);  // [outer=1, n=2, inner=3]
  LpNorm<float>(2, 1, 2, 3, x.data(), y.data());
  EXPECT_NEAR(y[0], 1, 1e-7);
  EXPECT_NEAR(y[2], 1, 1e-7);
  EXPECT_EQ(y[1], 0);  // a zero column stays 0 (not NaN)
  std::vector<float> a = {1, -3}, b(2);
  LpNorm<float>(1, 1, 2, 1, a.data(), b.data());
  EXPECT_NEAR(b[0], 0.25, 1e-7);
  EXPECT_NEAR(b[1], -0.75, 1e-7);
}

// Channels-last BatchNormalization (ChannelMomentsLast, BatchNormApplyLast, BatchNormGradLast) against the NCHW
// kernels on the same values laid out [N, C, S]: statistics, y (with and without the folded Relu), dX, dscale and
// dbias in training and inference, with a Relu mask; float, double, bfloat16 and float16; channel counts that are
// and are not multiples of a vector, rows past a block boundary; fresh random values, outputs poisoned first. The
// two layouts add in different orders: within a few ulps (one rounding of the result for the half types).
template <typename T>
void CheckBatchNormLast(int64_t N, int64_t C, int64_t S, uint64_t seed) {
  SCOPED_TRACE("N " + std::to_string(N) + " C " + std::to_string(C) + " S " + std::to_string(S) + " seed " +
               std::to_string(seed));
  const int64_t total = N * C * S, rows = N * S;
  auto make = [&](uint64_t sd, double lo, double hi) {
    const std::vector<float> f = Rand(total, sd, lo, hi);
    std::vector<T> v(f.size());
    for (size_t i = 0; i < f.size(); ++i) v[i] = static_cast<T>(f[i]);
    return v;
  };
  const std::vector<T> x = make(seed, 3, 7), dy = make(seed + 1, -1, 1), ro = make(seed + 2, -1, 1);
  auto last = [&](const std::vector<T>& v) {
    std::vector<T> r(v.size());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t j = 0; j < S; ++j) r[(n * S + j) * C + c] = v[(n * C + c) * S + j];
    return r;
  };
  auto first = [&](const std::vector<T>& v) {
    std::vector<T> r(v.size());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t j = 0; j < S; ++j) r[(n * C + c) * S + j] = v[(n * S + j) * C + c];
    return r;
  };
  const auto xl = last(x), dyl = last(dy), rol = last(ro);
  constexpr bool kHalf = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
  const double tol = std::is_same_v<T, double> ? 1e-12 : std::is_same_v<T, float> ? 1e-6 : 1.0 / 128;
  auto near = [&](double a, double b, double scale, const char* what, int64_t i) {
    ASSERT_NEAR(a, b, tol * (std::abs(b) + scale)) << what << " " << i;
  };
  std::vector<double> m1(C), v1(C), m2(C), v2(C);
  ChannelMoments(N, C, S, x.data(), m1.data(), v1.data());
  ChannelMomentsLast(rows, C, xl.data(), m2.data(), v2.data());
  for (int64_t c = 0; c < C; ++c) {
    ASSERT_NEAR(m2[c], m1[c], 1e-12 * std::abs(m1[c]) + 1e-13) << c;
    ASSERT_NEAR(v2[c], v1[c], 1e-10 * v1[c] + 1e-13) << c;
  }
  std::vector<double> scale(C), bias(C);
  for (int64_t c = 0; c < C; ++c) scale[c] = 0.5 + 0.01 * c, bias[c] = 0.1 * c - 1;
  const T poison = static_cast<T>(std::numeric_limits<float>::quiet_NaN());
  for (const bool relu : {false, true}) {
    std::vector<T> y1(total, poison), y2(total, poison);
    BatchNormApply(N, C, S, x.data(), scale.data(), bias.data(), m1.data(), v1.data(), 1e-5, y1.data(), relu);
    BatchNormApplyLast(rows, C, xl.data(), scale.data(), bias.data(), m1.data(), v1.data(), 1e-5, y2.data(), relu);
    const auto y2c = first(y2);
    for (int64_t i = 0; i < total; ++i)
      near(static_cast<double>(y2c[i]), static_cast<double>(y1[i]), kHalf ? 0.02 : 1e-9, "y", i);
  }
  for (const bool inference : {false, true})
    for (const bool masked : {false, true}) {
      SCOPED_TRACE(std::string(inference ? "inference" : "training") + (masked ? ", Relu mask" : ""));
      std::vector<T> d1(total, poison), d2(total, poison);
      std::vector<double> s1(C), b1(C), s2(C), b2(C);
      BatchNormGrad(N, C, S, dy.data(), x.data(), scale.data(), inference ? m1.data() : nullptr,
                    inference ? v1.data() : nullptr, 1e-5, d1.data(), s1.data(), b1.data(),
                    masked ? ro.data() : nullptr);
      BatchNormGradLast(rows, C, dyl.data(), xl.data(), scale.data(), inference ? m1.data() : nullptr,
                        inference ? v1.data() : nullptr, 1e-5, d2.data(), s2.data(), b2.data(),
                        masked ? rol.data() : nullptr);
      for (int64_t c = 0; c < C; ++c) {
        ASSERT_NEAR(s2[c], s1[c], 1e-9 * (std::abs(s1[c]) + rows)) << "dscale " << c;
        ASSERT_NEAR(b2[c], b1[c], 1e-9 * (std::abs(b1[c]) + rows)) << "dbias " << c;
      }
      // dx is a difference of terms of size ~|dy|: compared at that scale.
      const auto d2c = first(d2);
      for (int64_t i = 0; i < total; ++i)
        near(static_cast<double>(d2c[i]), static_cast<double>(d1[i]), kHalf ? 0.05 : 1e-3, "dx", i);
    }
}

TEST(CpuNorm, ChannelsLastBatchNormMatchesNchw) {
  const uint64_t seed = std::random_device{}();
  for (const auto& [n, c, s] : {std::tuple<int64_t, int64_t, int64_t>{3, 13, 63}, {2, 64, 100}, {1, 7, 1}}) {
    CheckBatchNormLast<float>(n, c, s, seed);
    CheckBatchNormLast<double>(n, c, s, seed + 1);
    CheckBatchNormLast<bfloat16>(n, c, s, seed + 2);
    CheckBatchNormLast<float16>(n, c, s, seed + 3);
  }
}

}  // namespace
}  // namespace ot::cpu
