// Pool against a brute-force reference: max with indices (row- and column-major), average with and without
// padding in the count, Lp, ceil mode, dilations, 1-D/2-D/3-D; plus the ceil-mode geometry rule.
#include "cpu_ops/pool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "cpu_ops/pool_grad.h"
#include "graph/ops/linalg_util.h"
#include "kernel_common/half.h"

namespace ot::cpu {
namespace {

int64_t Prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (auto x : v) p *= x;
  return p;
}

PoolSpec Make(PoolKind kind, std::vector<int64_t> in, std::vector<int64_t> k, std::vector<int64_t> st,
              std::vector<int64_t> dl, std::vector<int64_t> pb, std::vector<int64_t> pe, bool ceil) {
  PoolSpec s;
  s.kind = kind;
  s.n = 2, s.c = 3;
  s.in_spatial = in, s.kernel = k, s.strides = st, s.dilations = dl;
  for (size_t i = 0; i < in.size(); ++i) {
    auto g = linalg::ConvAxis(in[i], k[i], st[i], dl[i], pb[i], pe[i], "NOTSET", ceil);
    s.out_spatial.push_back(g.out);
    s.pad_begin.push_back(g.pad_begin);
    s.pad_end.push_back(g.pad_end);
  }
  return s;
}

// Brute force: enumerate window positions per output via index vectors.
void Check(const PoolSpec& s, uint64_t seed) {
  const int r = static_cast<int>(s.in_spatial.size());
  const int64_t in_sz = Prod(s.in_spatial), out_sz = Prod(s.out_spatial), k_sz = Prod(s.kernel);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> x(s.n * s.c * in_sz);
  for (auto& v : x) v = u(rng);
  std::vector<float> y(s.n * s.c * out_sz);
  std::vector<int64_t> idx(y.size());
  Pool<float>(s, x.data(), y.data(), s.kind == PoolKind::kMax ? idx.data() : nullptr);
  for (int64_t plane = 0; plane < s.n * s.c; ++plane)
    for (int64_t o = 0; o < out_sz; ++o) {
      double best = -INFINITY, sum = 0;
      int64_t best_i = -1, cnt_in = 0, cnt_pad = 0;
      for (int64_t kk = 0; kk < k_sz; ++kk) {
        int64_t ro = o, rk = kk, off = 0, off_cm = 0, mul = 1;
        bool inside = true, in_padded = true;
        std::vector<int64_t> pos(r);
        for (int d = r - 1; d >= 0; --d) {
          const int64_t oi = ro % s.out_spatial[d], ki = rk % s.kernel[d];
          ro /= s.out_spatial[d];
          rk /= s.kernel[d];
          pos[d] = oi * s.strides[d] - s.pad_begin[d] + ki * s.dilations[d];
          if (pos[d] < 0 || pos[d] >= s.in_spatial[d]) inside = false;
          if (pos[d] >= s.in_spatial[d] + s.pad_end[d]) in_padded = false;
          off += pos[d] * mul;
          mul *= s.in_spatial[d];
        }
        int64_t cm = 1;
        for (int d = 0; d < r; ++d) {
          off_cm += pos[d] * cm;
          cm *= s.in_spatial[d];
        }
        if (in_padded) ++cnt_pad;
        if (!inside) continue;
        ++cnt_in;
        const double v = x[plane * in_sz + off];
        if (v > best) {
          best = v;
          best_i = plane * in_sz + (s.indices_col_major ? off_cm : off);
        }
        sum += s.kind == PoolKind::kLp ? v * v : v;
      }
      const int64_t i = plane * out_sz + o;
      if (s.kind == PoolKind::kMax) {
        ASSERT_EQ(y[i], static_cast<float>(best)) << i;
        ASSERT_EQ(idx[i], best_i) << i;
      } else if (s.kind == PoolKind::kAvg) {
        ASSERT_NEAR(y[i], sum / (s.count_include_pad ? cnt_pad : cnt_in), 1e-5) << i;
      } else {
        ASSERT_NEAR(y[i], std::sqrt(sum), 1e-5) << i;
      }
    }
}

TEST(PoolKernel, CeilModeDropsWindowStartingInPadding) {
  // in 5, k 2, s 2, pads 1/1: floor gives 3, ceil gives 4 but the 4th window would start at 6 > 5+1-1.
  EXPECT_EQ(linalg::ConvAxis(5, 2, 2, 1, 1, 1, "NOTSET", false).out, 3);
  EXPECT_EQ(linalg::ConvAxis(5, 2, 2, 1, 1, 1, "NOTSET", true).out, 3);
  EXPECT_EQ(linalg::ConvAxis(6, 3, 2, 1, 0, 0, "NOTSET", true).out, 3);
  EXPECT_EQ(linalg::ConvAxis(6, 3, 2, 1, 0, 0, "NOTSET", false).out, 2);
  auto same = linalg::ConvAxis(7, 4, 2, 1, 0, 0, "SAME_LOWER", false);
  EXPECT_EQ(same.out, 4);
  EXPECT_EQ(same.pad_begin, 2);
  EXPECT_EQ(same.pad_end, 1);
}

TEST(PoolKernel, MaxWithIndices2D) {
  Check(Make(PoolKind::kMax, {7, 6}, {3, 2}, {2, 2}, {1, 1}, {1, 0}, {1, 1}, true), 1);
}

TEST(PoolKernel, MaxColumnMajorIndicesDilated3D) {
  PoolSpec s = Make(PoolKind::kMax, {5, 6, 4}, {2, 2, 2}, {1, 2, 1}, {2, 1, 2}, {0, 1, 0}, {1, 0, 1}, false);
  s.indices_col_major = true;
  Check(s, 2);
}

TEST(PoolKernel, AverageExcludeAndIncludePad) {
  for (bool include : {false, true}) {
    PoolSpec s = Make(PoolKind::kAvg, {6, 5}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, true);
    s.count_include_pad = include;
    Check(s, 3);
  }
}

TEST(PoolKernel, Average1DAndLp) {
  Check(Make(PoolKind::kAvg, {9}, {4}, {3}, {1}, {2}, {1}, false), 4);
  Check(Make(PoolKind::kLp, {6, 6}, {2, 3}, {2, 1}, {1, 1}, {0, 1}, {0, 1}, false), 5);
}

// A window that is the whole plane (GlobalAveragePool): each plane's mean against a double sum, for planes of
// 1, 7, 256 and 60 elements in 1-D to 3-D, plane counts that leave 1-3 planes after the groups of four, values
// offset by 1000 (a float running sum would lose the low bits), every output written (y prefilled with NaN); and
// float16/bfloat16 planes, whose mean is the double mean of the rounded inputs, rounded once.
TEST(PoolKernel, GlobalAverageIsEachPlanesMean) {
  struct Case {
    std::vector<int64_t> in;
    int64_t n, c;
  };
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> u(999.f, 1001.f);
  for (const Case& cs : std::vector<Case>{{{1}, 3, 1}, {{7}, 2, 3}, {{16, 16}, 5, 13}, {{3, 4, 5}, 1, 6}}) {
    PoolSpec s;
    s.kind = PoolKind::kAvg;
    s.n = cs.n, s.c = cs.c;
    s.in_spatial = s.kernel = cs.in;
    const size_t r = cs.in.size();
    s.out_spatial = s.strides = s.dilations = std::vector<int64_t>(r, 1);
    s.pad_begin = s.pad_end = std::vector<int64_t>(r, 0);
    const int64_t planes = s.n * s.c, sz = Prod(cs.in);
    std::vector<float> x(planes * sz);
    for (auto& v : x) v = u(rng);
    std::vector<float> y(planes, NAN);
    Pool<float>(s, x.data(), y.data(), nullptr);
    std::vector<float16> xh(x.size());
    std::vector<bfloat16> xb(x.size());
    for (size_t i = 0; i < x.size(); ++i) xh[i] = float16(x[i] - 1000.f), xb[i] = bfloat16(x[i] - 1000.f);
    std::vector<float16> yh(planes, float16(NAN));
    std::vector<bfloat16> yb(planes, bfloat16(NAN));
    Pool<float16>(s, xh.data(), yh.data(), nullptr);
    Pool<bfloat16>(s, xb.data(), yb.data(), nullptr);
    for (int64_t p = 0; p < planes; ++p) {
      double sum = 0, sum_h = 0, sum_b = 0;
      for (int64_t j = 0; j < sz; ++j) {
        sum += x[p * sz + j];
        sum_h += static_cast<float>(xh[p * sz + j]);
        sum_b += static_cast<float>(xb[p * sz + j]);
      }
      ASSERT_NEAR(y[p], sum / sz, 1000 * 1e-7) << "plane " << p << " of " << sz;
      EXPECT_EQ(static_cast<float>(yh[p]), static_cast<float>(float16(static_cast<float>(sum_h / sz)))) << p;
      EXPECT_EQ(static_cast<float>(yb[p]), static_cast<float>(bfloat16(static_cast<float>(sum_b / sz)))) << p;
    }
  }
}

// Max pooling without indices over windows that tile the rows (2 or 3 wide, stride = width; rows overlapping,
// tiling or clipped; 1-D and 2-D; a last column left out; rows of 5-20 windows, so both the 8- and 4-wide vectors
// and their scalar tails run) against the scalar path that MaxPool with indices takes,
// bit for bit, in float and double: values with ties, -0 before and after +0, NaNs and infinities, so the first
// maximum must win and a NaN must stay; y prefilled with a sentinel, so every output is written.
template <typename T>
void CheckTiledMaxAgainstScalar(const PoolSpec& s, uint64_t seed) {
  const int64_t in_sz = Prod(s.in_spatial), out_sz = Prod(s.out_spatial);
  std::mt19937_64 rng(seed);
  const T specials[] = {T(0), -T(0), T(NAN), T(INFINITY), -T(INFINITY), T(1), T(1)};
  std::vector<T> x(s.n * s.c * in_sz);
  for (auto& v : x) {
    const uint64_t r = rng() % 40;
    v = r < 7 ? specials[r] : static_cast<T>(static_cast<int>(rng() % 9) - 4) * T(0.5);
  }
  std::vector<T> fast(s.n * s.c * out_sz, T(12345)), ref(fast.size(), T(12345));
  std::vector<int64_t> idx(ref.size());
  Pool<T>(s, x.data(), fast.data(), nullptr);
  Pool<T>(s, x.data(), ref.data(), idx.data());
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_EQ(0, std::memcmp(&fast[i], &ref[i], sizeof(T))) << "output " << i << ": " << fast[i] << " vs " << ref[i];
}

TEST(PoolKernel, MaxOverRowTilingWindowsEqualsScalarScan) {
  const std::vector<PoolSpec> specs = {
      Make(PoolKind::kMax, {8, 10}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, false),  // the CNN's 2x2 pools
      Make(PoolKind::kMax, {6, 40}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, false),  // 20 columns: vectors + tail
      Make(PoolKind::kMax, {5, 35}, {2, 2}, {1, 2}, {1, 1}, {0, 0}, {0, 0}, false),  // overlapping rows, wide
      Make(PoolKind::kMax, {9, 11}, {3, 3}, {3, 3}, {1, 1}, {0, 0}, {0, 0}, false),  // 3x3, last 2 columns out
      Make(PoolKind::kMax, {7, 8}, {3, 2}, {1, 2}, {1, 1}, {0, 0}, {0, 0}, false),   // overlapping rows
      Make(PoolKind::kMax, {9, 6}, {2, 3}, {4, 3}, {1, 1}, {0, 0}, {0, 0}, false),   // rows skipped between bands
      Make(PoolKind::kMax, {9}, {2}, {2}, {1}, {0}, {0}, false),                     // 1-D, last element out
  };
  uint64_t seed = 30;
  for (const PoolSpec& s : specs) {
    CheckTiledMaxAgainstScalar<float>(s, ++seed);
    CheckTiledMaxAgainstScalar<double>(s, ++seed);
  }
}

TEST(PoolKernel, MaxUint8) {
  PoolSpec s = Make(PoolKind::kMax, {2, 2}, {2, 2}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, false);
  s.n = 1, s.c = 1;
  std::vector<uint8_t> x{3, 250, 7, 1}, y(1);
  Pool<uint8_t>(s, x.data(), y.data(), nullptr);
  EXPECT_EQ(y[0], 250);
}

// MaxPoolGrad against a brute-force reference: each window (row-major, windows in output order) routes its dY
// to its first maximum (a NaN, once met, stays), accumulated in float in window order into a zeroed dX -- the
// exact rule, so the comparison is bit for bit (a -0 dY lands as +0). X holds few distinct values (many ties)
// and some NaNs; dX starts as a sentinel, so an element left unwritten fails. The relu form against the reference
// masked as ReluGrad masks it.
template <typename T>
void CheckMaxPoolGradT(const PoolSpec& s, uint64_t seed) {
  const int r = static_cast<int>(s.in_spatial.size());
  const int64_t in_sz = Prod(s.in_spatial), out_sz = Prod(s.out_spatial), k_sz = Prod(s.kernel);
  const int64_t planes = s.n * s.c;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> q(-2, 2), nan_pick(0, 40);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  std::vector<T> x(planes * in_sz), dy(planes * out_sz);
  for (auto& v : x) v = nan_pick(rng) == 0 ? T(NAN) : static_cast<T>(q(rng)) * T(0.5);
  for (auto& v : dy) v = nan_pick(rng) == 0 ? T(-0.0) : static_cast<T>(u(rng));
  std::vector<T> ref(x.size(), T(0)), dx(x.size(), T(-777));
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t o = 0; o < out_sz; ++o) {
      int64_t best = -1;
      for (int64_t kk = 0; kk < k_sz; ++kk) {
        int64_t ro = o, rk = kk, off = 0, mul = 1;
        bool inside = true;
        for (int d = r - 1; d >= 0; --d) {
          const int64_t oi = ro % s.out_spatial[d], ki = rk % s.kernel[d];
          ro /= s.out_spatial[d];
          rk /= s.kernel[d];
          const int64_t pos = oi * s.strides[d] - s.pad_begin[d] + ki * s.dilations[d];
          if (pos < 0 || pos >= s.in_spatial[d]) inside = false;
          off += pos * mul;
          mul *= s.in_spatial[d];
        }
        if (!inside) continue;
        const T v = x[plane * in_sz + off];
        const T b = best < 0 ? T(0) : x[plane * in_sz + best];
        if (best < 0 || v > b || (std::isnan(v) && !std::isnan(b))) best = off;
      }
      if (best >= 0) ref[plane * in_sz + best] += dy[plane * out_sz + o];
    }
  MaxPoolGrad<T>(s, dy.data(), x.data(), dx.data());
  for (size_t i = 0; i < dx.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(&dx[i], &ref[i], sizeof(T))) << "element " << i << ": " << dx[i] << " vs " << ref[i];
  }
  // relu: ReluGrad(dX, X) folded in -- dX where X > 0, else +0 (X <= 0 and NaN), the same bits.
  std::vector<T> dxr(x.size(), T(-777));
  MaxPoolGrad<T>(s, dy.data(), x.data(), dxr.data(), /*relu=*/true);
  for (size_t i = 0; i < dxr.size(); ++i) {
    const T want = x[i] > T(0) ? ref[i] : T(0);
    ASSERT_EQ(0, std::memcmp(&dxr[i], &want, sizeof(T))) << "relu, element " << i << ": " << dxr[i] << " vs " << want;
  }
}

// Float and double (the 2x2 vector routine is 8 and 4 windows wide).
void CheckMaxPoolGrad(const PoolSpec& s, uint64_t seed) {
  CheckMaxPoolGradT<float>(s, seed);
  CheckMaxPoolGradT<double>(s, seed);
}

TEST(PoolGradKernel, MaxPoolGradTilesOverlapsGapsPadsAndTies) {
  uint64_t seed = 10;
  // 2x2 stride 2, tiling exactly and with a dropped odd row/column (floor).
  CheckMaxPoolGrad(Make(PoolKind::kMax, {8, 12}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, false), seed++);
  CheckMaxPoolGrad(Make(PoolKind::kMax, {9, 11}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, false), seed++);
  // 3x3 stride 3, odd sizes; a non-square kernel with gaps between windows (stride > kernel).
  CheckMaxPoolGrad(Make(PoolKind::kMax, {10, 13}, {3, 3}, {3, 3}, {1, 1}, {0, 0}, {0, 0}, false), seed++);
  CheckMaxPoolGrad(Make(PoolKind::kMax, {11, 17}, {2, 3}, {3, 4}, {1, 1}, {0, 0}, {0, 0}, false), seed++);
  // Wide rows (the vector loops' bodies and tails).
  CheckMaxPoolGrad(Make(PoolKind::kMax, {6, 75}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, false), seed++);
  // Overlapping windows (3x3 stride 2, 3x3 stride 1): shared elements accumulate in window order.
  CheckMaxPoolGrad(Make(PoolKind::kMax, {9, 10}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, false), seed++);
  CheckMaxPoolGrad(Make(PoolKind::kMax, {7, 8}, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, false), seed++);
  // 1-D, 3-D, and pads / dilations / ceil mode (the gathered-window path).
  CheckMaxPoolGrad(Make(PoolKind::kMax, {21}, {2}, {2}, {1}, {0}, {0}, false), seed++);
  CheckMaxPoolGrad(Make(PoolKind::kMax, {4, 6, 5}, {2, 2, 2}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, false),
                   seed++);
  CheckMaxPoolGrad(Make(PoolKind::kMax, {7, 6}, {3, 2}, {2, 2}, {1, 1}, {1, 0}, {1, 1}, true), seed++);
  CheckMaxPoolGrad(Make(PoolKind::kMax, {9, 9}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, true), seed++);
  CheckMaxPoolGrad(Make(PoolKind::kMax, {9, 10}, {2, 2}, {1, 2}, {2, 1}, {0, 0}, {0, 0}, false), seed++);
  // Padded overlapping windows (the row-wise argmax; edge windows clipped): ResNet's 3x3 stride-2 stem pool with
  // pads 1 on even and odd sizes and wide rows, asymmetric pads, pads with ceil mode, stride 1, 1-D.
  CheckMaxPoolGrad(Make(PoolKind::kMax, {16, 16}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false), seed++);
  CheckMaxPoolGrad(Make(PoolKind::kMax, {15, 77}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false), seed++);
  CheckMaxPoolGrad(Make(PoolKind::kMax, {9, 40}, {3, 2}, {2, 3}, {1, 1}, {2, 0}, {0, 1}, false), seed++);
  CheckMaxPoolGrad(Make(PoolKind::kMax, {10, 21}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, true), seed++);
  CheckMaxPoolGrad(Make(PoolKind::kMax, {8, 33}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, false), seed++);
  CheckMaxPoolGrad(Make(PoolKind::kMax, {50}, {3}, {2}, {1}, {1}, {1}, false), seed++);
  CheckMaxPoolGrad(Make(PoolKind::kMax, {4, 5}, {5, 5}, {2, 2}, {1, 1}, {2, 2}, {2, 2}, false), seed++);
}

// Channels-last pooling (PoolLast, MaxPoolGradLast, AvgPoolGradLast) against the NCHW kernels on the same values:
// max and average (with and without count_include_pad), overlapping 3x3 stride-2 windows with pads (a ResNet stem),
// 2x2 stride 2, ceil mode, dilation, 1-D and 3-D, 37 channels (past a vector and a channel block), ties (values on a
// coarse grid) and a NaN; the Relu fold of the max gradient; float and double (the forward also bf16). Outputs are
// poisoned first. Max and its gradient: equal bit for bit; average: within float rounding.
TEST(PoolKernel, ChannelsLastMatchesNchw) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<PoolSpec> specs = {
      Make(PoolKind::kMax, {9, 11}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false),
      Make(PoolKind::kMax, {8, 8}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, false),
      Make(PoolKind::kMax, {7, 9}, {3, 2}, {2, 2}, {2, 1}, {1, 0}, {1, 1}, true),
      Make(PoolKind::kMax, {13}, {3}, {2}, {1}, {1}, {1}, false),
      Make(PoolKind::kMax, {4, 5, 6}, {2, 2, 3}, {2, 1, 2}, {1, 1, 1}, {0, 1, 1}, {1, 0, 1}, false)};
  for (size_t i = 0, n = specs.size(); i < n; ++i) {
    PoolSpec a = specs[i];
    a.kind = PoolKind::kAvg;
    specs.push_back(a);
    a.count_include_pad = true;
    specs.push_back(a);
  }
  for (PoolSpec s : specs) {
    s.n = 2;
    s.c = 37;
    const int64_t in_sz = Prod(s.in_spatial), out_sz = Prod(s.out_spatial);
    const int64_t nx = s.n * s.c * in_sz, ny = s.n * s.c * out_sz;
    SCOPED_TRACE("kind " + std::to_string(static_cast<int>(s.kind)) + " in " + std::to_string(in_sz) + " include pad " +
                 std::to_string(s.count_include_pad));
    std::uniform_int_distribution<int> q(-8, 8);
    std::vector<float> x(nx), dy(ny);
    for (auto& v : x) v = q(rng) / 4.f;  // a coarse grid: ties in most windows
    for (auto& v : dy) v = q(rng) / 8.f + 0.01f;
    x[nx / 3] = std::numeric_limits<float>::quiet_NaN();
    auto last = [&](const std::vector<float>& v, int64_t sp) {
      std::vector<float> r(v.size());
      for (int64_t n = 0; n < s.n; ++n)
        for (int64_t c = 0; c < s.c; ++c)
          for (int64_t p = 0; p < sp; ++p) r[(n * sp + p) * s.c + c] = v[(n * s.c + c) * sp + p];
      return r;
    };
    const float poison = -12345.f;
    std::vector<float> y(ny, poison), yl(ny, poison);
    Pool(s, x.data(), y.data(), nullptr);
    PoolLast(s, last(x, in_sz).data(), yl.data());
    const auto y_as_last = last(y, out_sz);
    const bool max = s.kind == PoolKind::kMax;
    for (int64_t j = 0; j < ny; ++j) {
      if (std::isnan(y_as_last[j])) {
        ASSERT_TRUE(std::isnan(yl[j])) << "y " << j;
      } else if (max) {
        ASSERT_EQ(yl[j], y_as_last[j]) << "y " << j;
      } else {
        ASSERT_NEAR(yl[j], y_as_last[j], 1e-6 * (1 + std::abs(y_as_last[j]))) << "y " << j;
      }
    }
    // bf16 forward: against the float one on the rounded values (max: the same; average: one rounding).
    std::vector<bfloat16> xh(nx), yh(ny);
    const auto xlast = last(x, in_sz);
    for (int64_t j = 0; j < nx; ++j) xh[j] = bfloat16(xlast[j]);
    PoolLast(s, xh.data(), yh.data());
    for (int64_t j = 0; j < ny; ++j)
      if (!std::isnan(yl[j])) ASSERT_NEAR(static_cast<float>(yh[j]), yl[j], 1e-2 * (1 + std::abs(yl[j]))) << j;
    // Gradients (no NaN: a NaN's window takes it, in both layouts alike, but dX then compares NaN-free only there).
    x[nx / 3] = 0.25f;
    for (const bool relu : {false, true}) {
      if (!max && relu) continue;
      std::vector<float> dx(nx, poison), dxl(nx, poison);
      if (max) {
        MaxPoolGrad(s, dy.data(), x.data(), dx.data(), relu);
        MaxPoolGradLast(s, last(dy, out_sz).data(), last(x, in_sz).data(), dxl.data(), relu);
      } else {
        AvgPoolGrad(s, dy.data(), dx.data());
        AvgPoolGradLast(s, last(dy, out_sz).data(), dxl.data());
      }
      const auto dx_as_last = last(dx, in_sz);
      if (max) {
        // bf16 (x and dy on the coarse grid are bf16 values): the float sums rounded once, so bf16(float result).
        const auto xl = last(x, in_sz), dyl = last(dy, out_sz);
        std::vector<bfloat16> xb(nx), dyb(ny), dxb(nx, bfloat16(poison));
        for (int64_t j = 0; j < nx; ++j) xb[j] = bfloat16(xl[j]);
        for (int64_t j = 0; j < ny; ++j) dyb[j] = bfloat16(dyl[j]);
        std::vector<float> dyr(ny), dxr(nx, poison);
        for (int64_t j = 0; j < ny; ++j) dyr[j] = static_cast<float>(dyb[j]);
        MaxPoolGradLast(s, dyr.data(), xl.data(), dxr.data(), relu);
        MaxPoolGradLast(s, dyb.data(), xb.data(), dxb.data(), relu);
        for (int64_t j = 0; j < nx; ++j)
          ASSERT_EQ(static_cast<float>(dxb[j]), static_cast<float>(bfloat16(dxr[j]))) << "bf16 dx " << j;
      }
      for (int64_t j = 0; j < nx; ++j) {
        if (max)
          ASSERT_EQ(dxl[j], dx_as_last[j]) << "dx " << j << (relu ? " relu" : "");
        else
          ASSERT_NEAR(dxl[j], dx_as_last[j], 1e-6 * (1 + std::abs(dx_as_last[j]))) << "dx " << j;
      }
      std::vector<double> dxd(nx, -1.0);
      const std::vector<double> dyd(dy.begin(), dy.end()), xd(x.begin(), x.end());
      if (max) {
        std::vector<double> xdl(nx), dydl(ny);
        const auto xl = last(x, in_sz), dyl = last(dy, out_sz);
        for (int64_t j = 0; j < nx; ++j) xdl[j] = xl[j];
        for (int64_t j = 0; j < ny; ++j) dydl[j] = dyl[j];
        MaxPoolGradLast(s, dydl.data(), xdl.data(), dxd.data(), relu);
        for (int64_t j = 0; j < nx; ++j)
          ASSERT_NEAR(dxd[j], dxl[j], 1e-6 * (1 + std::abs(dxl[j]))) << "double dx " << j;
      }
    }
  }
}

}  // namespace
}  // namespace ot::cpu
