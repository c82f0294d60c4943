// cpu_ops reductions against naive double references: every ReduceKind over many axis sets, empty reduced
// dims, integer and half dtypes, ArgMax/ArgMin (ties, select_last), CumSum (exclusive, reverse).
#include "cpu_ops/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernel_common/half.h"

namespace ot::cpu {
namespace {

std::vector<double> Rand(int64_t n, double lo, double hi, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

int64_t Numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (auto x : d) n *= x;
  return n;
}

// Naive reference: for each output index (keepdims layout), walk all input elements that map to it.
std::vector<double> NaiveReduce(ReduceKind k, const std::vector<int64_t>& dims, const std::vector<bool>& red,
                                const std::vector<double>& x) {
  std::vector<int64_t> od(dims);
  for (size_t d = 0; d < dims.size(); ++d)
    if (red[d]) od[d] = 1;
  const int64_t on = Numel(od);
  std::vector<std::vector<double>> groups(on);
  const int64_t n = Numel(dims);
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = i, o = 0, os = 1;
    for (size_t d = dims.size(); d-- > 0;) {
      int64_t idx = r % dims[d];
      r /= dims[d];
      if (!red[d]) o += idx * os;
      os *= od[d];
    }
    groups[o].push_back(x[i]);
  }
  std::vector<double> y(on);
  for (int64_t o = 0; o < on; ++o) {
    const auto& g = groups[o];
    double a = 0;
    switch (k) {
      case ReduceKind::kSum:
        for (double v : g) a += v;
        break;
      case ReduceKind::kMean:
        for (double v : g) a += v;
        a /= g.size();
        break;
      case ReduceKind::kMax:
        a = -INFINITY;
        for (double v : g) a = std::max(a, v);
        break;
      case ReduceKind::kMin:
        a = INFINITY;
        for (double v : g) a = std::min(a, v);
        break;
      case ReduceKind::kProd:
        a = 1;
        for (double v : g) a *= v;
        break;
      case ReduceKind::kL1:
        for (double v : g) a += std::fabs(v);
        break;
      case ReduceKind::kL2:
        for (double v : g) a += v * v;
        a = std::sqrt(a);
        break;
      case ReduceKind::kLogSum:
        for (double v : g) a += v;
        a = std::log(a);
        break;
      case ReduceKind::kLogSumExp:
        for (double v : g) a += std::exp(v);
        a = std::log(a);
        break;
      case ReduceKind::kSumSquare:
        for (double v : g) a += v * v;
        break;
    }
    y[o] = a;
  }
  return y;
}

const ReduceKind kAllKinds[] = {ReduceKind::kSum,       ReduceKind::kMean,     ReduceKind::kMax, ReduceKind::kMin,
                                ReduceKind::kProd,      ReduceKind::kL1,       ReduceKind::kL2,  ReduceKind::kLogSum,
                                ReduceKind::kLogSumExp, ReduceKind::kSumSquare};

TEST(CpuReduce, AllKindsAllAxisSetsFloat32) {
  const std::vector<std::vector<int64_t>> shapes = {{3, 4, 5}, {2, 1, 7, 3}, {6}, {2, 3, 1, 600}};
  uint64_t seed = 1;
  for (const auto& dims : shapes) {
    const int rank = static_cast<int>(dims.size());
    for (int mask = 0; mask < (1 << rank); ++mask) {
      std::vector<bool> red(rank);
      for (int d = 0; d < rank; ++d) red[d] = (mask >> d) & 1;
      // Positive inputs keep LogSum finite; Prod stays moderate.
      std::vector<double> xd = Rand(Numel(dims), 0.5, 1.5, seed++);
      std::vector<float> x(xd.begin(), xd.end());
      for (size_t i = 0; i < x.size(); ++i) xd[i] = x[i];
      ReduceGeometry g = MakeReduceGeometry(dims, red);
      for (ReduceKind k : kAllKinds) {
        std::vector<double> ref = NaiveReduce(k, dims, red, xd);
        ASSERT_EQ(g.out_numel(), static_cast<int64_t>(ref.size()));
        std::vector<float> y(ref.size(), -12345.f);
        Reduce<float>(k, g, x.data(), y.data());
        for (size_t i = 0; i < ref.size(); ++i)
          ASSERT_NEAR(y[i], ref[i], 1e-5 * std::fabs(ref[i]) + 1e-6)
              << "kind " << static_cast<int>(k) << " mask " << mask << " rank " << rank << " i " << i;
      }
    }
  }
}

TEST(CpuReduce, LongContiguousReductionsSplitIntoChunks) {
  // Reduce-all and a few long rows take the chunked path; compare every kind with the naive reference.
  for (const auto& [dims, red] : {std::pair<std::vector<int64_t>, std::vector<bool>>{{100003}, {true}},
                                  {{3, 70001}, {false, true}},
                                  {{2, 300, 250}, {true, true, true}}}) {
    std::vector<double> xd = Rand(Numel(dims), 0.9, 1.1, 77);
    std::vector<float> x(xd.begin(), xd.end());
    for (size_t i = 0; i < x.size(); ++i) xd[i] = x[i];
    ReduceGeometry g = MakeReduceGeometry(dims, red);
    for (ReduceKind k : kAllKinds) {
      if (k == ReduceKind::kProd) continue;  // overflows at this length
      std::vector<double> ref = NaiveReduce(k, dims, red, xd);
      std::vector<float> y(ref.size());
      Reduce<float>(k, g, x.data(), y.data());
      for (size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(y[i], ref[i], 1e-6 * std::fabs(ref[i])) << "kind " << static_cast<int>(k);
    }
  }
}

// A sum over the leading axes (a channels-last bias gradient) runs as column sums split into row chunks: against the
// double reference, fresh random data, every column written (y starts as NaN), and the same bits each run and per
// image of the batched form.
TEST(CpuReduce, LeadingAxesSumSplitsRowsIntoChunks) {
  for (const auto& dims : std::vector<std::vector<int64_t>>{{3, 1500, 37}, {5000, 600}, {7, 3}}) {
    const std::vector<bool> red = {true, dims.size() == 3, false};
    std::vector<bool> r(red.begin(), red.begin() + static_cast<long>(dims.size()));
    std::vector<double> xd = Rand(Numel(dims), -1, 1, std::random_device{}());
    std::vector<float> x(xd.begin(), xd.end());
    for (size_t i = 0; i < x.size(); ++i) xd[i] = x[i];
    const ReduceGeometry g = MakeReduceGeometry(dims, r);
    const std::vector<double> ref = NaiveReduce(ReduceKind::kSum, dims, r, xd);
    std::vector<float> y(ref.size(), std::nanf("")), again(ref.size(), std::nanf(""));
    Reduce<float>(ReduceKind::kSum, g, x.data(), y.data());
    Reduce<float>(ReduceKind::kSum, g, x.data(), again.data());
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_NEAR(y[i], ref[i], 1e-6 * (1 + std::fabs(ref[i]))) << "column " << i;
      ASSERT_EQ(y[i], again[i]);
    }
    const int64_t cols = dims.back(), rows = Numel(dims) / cols;
    std::vector<float> two(2 * x.size()), y2(2 * cols, std::nanf(""));
    std::copy(x.begin(), x.end(), two.begin());
    std::copy(x.begin(), x.end(), two.begin() + static_cast<long>(x.size()));
    SumRowsToColumnsBatched<float>(two.data(), 2, rows, cols, y2.data());
    for (int64_t j = 0; j < cols; ++j) {
      ASSERT_EQ(y2[j], y[j]);
      ASSERT_EQ(y2[cols + j], y[j]);
    }
  }
}

TEST(CpuReduce, SumLikeOverNonTrailingAxesWithContiguousRuns) {
  // The last reduced run is contiguous and no kept dim trails (a conv bias gradient: axes (0, 2, 3) of NCHW):
  // runs summed in vector lanes. Odd sizes exercise the lane tails; every output is written (sentinel) and
  // matches the double reference; float64 too.
  using Case = std::pair<std::vector<int64_t>, std::vector<bool>>;
  for (const auto& [dims, red] :
       {Case{{5, 3, 7, 33}, {true, false, true, true}}, Case{{3, 4, 17}, {true, false, true}},
        Case{{4, 5, 9, 19}, {true, true, false, true}}, Case{{2, 6, 131}, {false, false, true}},
        Case{{7, 3, 5, 2, 23}, {false, true, false, true, true}}}) {
    std::vector<double> xd = Rand(Numel(dims), 0.25, 2.0, 123);
    std::vector<float> x(xd.begin(), xd.end());
    for (size_t i = 0; i < x.size(); ++i) xd[i] = x[i];
    ReduceGeometry g = MakeReduceGeometry(dims, red);
    for (ReduceKind k : {ReduceKind::kSum, ReduceKind::kMean, ReduceKind::kSumSquare, ReduceKind::kL1, ReduceKind::kL2,
                         ReduceKind::kLogSum}) {
      std::vector<double> ref = NaiveReduce(k, dims, red, xd);
      std::vector<float> y(ref.size(), -12345.f);
      Reduce<float>(k, g, x.data(), y.data());
      std::vector<double> yd(ref.size(), -12345.0);
      Reduce<double>(k, g, xd.data(), yd.data());
      for (size_t i = 0; i < ref.size(); ++i) {
        ASSERT_NEAR(y[i], ref[i], 1e-6 * std::fabs(ref[i]) + 1e-7) << "kind " << static_cast<int>(k) << " i " << i;
        ASSERT_NEAR(yd[i], ref[i], 1e-12 * std::fabs(ref[i])) << "kind " << static_cast<int>(k) << " i " << i;
      }
    }
  }
}

TEST(CpuReduce, LogSumExpIsStableForLargeInputs) {
  std::vector<int64_t> dims = {2, 3};
  std::vector<double> x = {1000, 1001, 1002, -1000, -1001, -1002};
  ReduceGeometry g = MakeReduceGeometry(dims, {false, true});
  std::vector<double> y(2);
  Reduce<double>(ReduceKind::kLogSumExp, g, x.data(), y.data());
  const double l = std::log(1 + std::exp(-1.0) + std::exp(-2.0));
  EXPECT_NEAR(y[0], 1002 + l, 1e-9);
  EXPECT_NEAR(y[1], -1000 + l, 1e-9);
}

TEST(CpuReduce, EmptyReducedDimGivesIdentity) {
  std::vector<int64_t> dims = {2, 0, 3};
  ReduceGeometry g = MakeReduceGeometry(dims, {false, true, false});
  ASSERT_EQ(g.out_numel(), 6);
  std::vector<float> y(6, 7.f);
  Reduce<float>(ReduceKind::kSum, g, nullptr, y.data());
  for (float v : y) EXPECT_EQ(v, 0.f);
  Reduce<float>(ReduceKind::kProd, g, nullptr, y.data());
  for (float v : y) EXPECT_EQ(v, 1.f);
  Reduce<float>(ReduceKind::kMax, g, nullptr, y.data());
  for (float v : y) EXPECT_EQ(v, -std::numeric_limits<float>::infinity());
  Reduce<float>(ReduceKind::kMin, g, nullptr, y.data());
  for (float v : y) EXPECT_EQ(v, std::numeric_limits<float>::infinity());
  Reduce<float>(ReduceKind::kLogSumExp, g, nullptr, y.data());
  for (float v : y) EXPECT_EQ(v, -std::numeric_limits<float>::infinity());
  std::vector<int32_t> yi(6, 7);
  Reduce<int32_t>(ReduceKind::kMax, g, nullptr, yi.data());
  for (int32_t v : yi) EXPECT_EQ(v, std::numeric_limits<int32_t>::min());
}

TEST(CpuReduce, IntegerDtypes) {
  std::vector<int64_t> dims = {4, 5};
  std::vector<int32_t> x(20);
  std::mt19937 gen(3);
  for (auto& v : x) v = static_cast<int32_t>(gen() % 201) - 100;
  ReduceGeometry g = MakeReduceGeometry(dims, {true, false});
  std::vector<int32_t> s(5), mx(5), mn(5), mean(5);
  Reduce<int32_t>(ReduceKind::kSum, g, x.data(), s.data());
  Reduce<int32_t>(ReduceKind::kMax, g, x.data(), mx.data());
  Reduce<int32_t>(ReduceKind::kMin, g, x.data(), mn.data());
  Reduce<int32_t>(ReduceKind::kMean, g, x.data(), mean.data());
  for (int j = 0; j < 5; ++j) {
    int32_t es = 0, emx = INT32_MIN, emn = INT32_MAX;
    for (int i = 0; i < 4; ++i) {
      es += x[i * 5 + j];
      emx = std::max(emx, x[i * 5 + j]);
      emn = std::min(emn, x[i * 5 + j]);
    }
    EXPECT_EQ(s[j], es);
    EXPECT_EQ(mx[j], emx);
    EXPECT_EQ(mn[j], emn);
    EXPECT_EQ(mean[j], es / 4);
  }
}

TEST(CpuReduce, Float16AccumulatesInFloat) {
  // 4096 ones in fp16: a half accumulator would stop at 2048.
  std::vector<int64_t> dims = {4096};
  std::vector<float16> x(4096, float16(1.0f));
  ReduceGeometry g = MakeReduceGeometry(dims, {true});
  float16 y;
  Reduce<float16>(ReduceKind::kSum, g, x.data(), &y);
  EXPECT_EQ(static_cast<float>(y), 4096.f);
}

TEST(CpuArgReduce, FirstAndLastIndexOnTies) {
  // [outer=2, n=4, inner=2]
  std::vector<float> x = {1,  5, 3,  5, 3,  0, 2,  5,  //
                          -1, 2, -1, 2, -3, 2, -3, 1};
  std::vector<int64_t> y(4);
  ArgReduce<float>(true, false, 2, 4, 2, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<int64_t>{1, 0, 0, 0}));
  ArgReduce<float>(true, true, 2, 4, 2, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<int64_t>{2, 3, 1, 2}));
  ArgReduce<float>(false, false, 2, 4, 2, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<int64_t>{0, 2, 2, 3}));
  ArgReduce<float>(false, true, 2, 4, 2, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<int64_t>{0, 2, 3, 3}));
}

TEST(CpuCumSum, ExclusiveReverseAlongMiddleAxis) {
  const int64_t outer = 3, n = 5, inner = 4;
  std::vector<double> x = Rand(outer * n * inner, -1, 1, 9);
  for (int excl = 0; excl < 2; ++excl) {
    for (int rev = 0; rev < 2; ++rev) {
      std::vector<double> y(x.size());
      CumSum<double>(excl, rev, outer, n, inner, x.data(), y.data());
      for (int64_t i = 0; i < outer; ++i)
        for (int64_t j = 0; j < inner; ++j)
          for (int64_t k = 0; k < n; ++k) {
            double e = 0;
            for (int64_t t = 0; t < n; ++t) {
              bool in = rev ? (excl ? t > k : t >= k) : (excl ? t < k : t <= k);
              if (in) e += x[(i * n + t) * inner + j];
            }
            ASSERT_NEAR(y[(i * n + k) * inner + j], e, 1e-12) << excl << rev;
          }
    }
  }
  std::vector<int32_t> xi = {1, 2, 3}, yi(3);
  CumSum<int32_t>(false, false, 1, 3, 1, xi.data(), yi.data());
  EXPECT_EQ(yi, (std::vector<int32_t>{1, 3, 6}));
}

}  // namespace
}  // namespace ot::cpu
