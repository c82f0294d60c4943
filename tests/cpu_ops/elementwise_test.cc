// Elementwise kernels against naive double references on random inputs: unary math, broadcasting binary ops,
// Pow with mixed types, Mod sign rules, comparisons, Where, the variadic folds, Cast, Clip and Dropout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cpu_ops/elementwise_binary.h"
#include "cpu_ops/elementwise_cast.h"
#include "cpu_ops/elementwise_common.h"
#include "cpu_ops/elementwise_unary.h"

namespace ot::cpu {
namespace {

std::mt19937_64& Gen() {
  static std::mt19937_64 g(12345);
  return g;
}

std::vector<double> Uniform(int64_t n, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = u(Gen());
  return v;
}

template <typename T>
std::vector<T> To(const std::vector<double>& v) {
  std::vector<T> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = static_cast<T>(static_cast<ComputeType<T>>(v[i]));
  return r;
}

int64_t Numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// Offset of output index `i` into an operand of dims `in` broadcast to `out` (right-aligned).
int64_t BroadcastOffset(int64_t i, const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  int64_t off = 0, stride = 1;
  for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
    int64_t idx = i % out[d];
    i /= out[d];
    int k = d - static_cast<int>(out.size() - in.size());
    if (k >= 0) {
      if (in[k] != 1) off += idx * stride;
      stride *= in[k];
    }
  }
  return off;
}

struct UnaryCase {
  UnaryOp op;
  double (*ref)(double);
  double lo, hi;
};

TEST(ElementwiseUnary, FloatOpsMatchDoubleReference) {
  const std::vector<UnaryCase> cases = {
      {UnaryOp::kAbs, [](double x) { return std::fabs(x); }, -3, 3},
      {UnaryOp::kNeg, [](double x) { return -x; }, -3, 3},
      {UnaryOp::kExp, [](double x) { return std::exp(x); }, -3, 3},
      {UnaryOp::kLog, [](double x) { return std::log(x); }, 0.1, 5},
      {UnaryOp::kSqrt, [](double x) { return std::sqrt(x); }, 0, 5},
      {UnaryOp::kReciprocal, [](double x) { return 1 / x; }, 0.5, 5},
      {UnaryOp::kRelu, [](double x) { return x > 0 ? x : 0; }, -3, 3},
      {UnaryOp::kSigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, -8, 8},
      {UnaryOp::kTanh, [](double x) { return std::tanh(x); }, -3, 3},
      {UnaryOp::kErf, [](double x) { return std::erf(x); }, -3, 3},
      {UnaryOp::kSoftplus, [](double x) { return std::log(1 + std::exp(x)); }, -10, 10},
      {UnaryOp::kSoftsign, [](double x) { return x / (1 + std::fabs(x)); }, -3, 3},
      {UnaryOp::kSin, [](double x) { return std::sin(x); }, -3, 3},
      {UnaryOp::kAcos, [](double x) { return std::acos(x); }, -0.99, 0.99},
      {UnaryOp::kAcosh, [](double x) { return std::acosh(x); }, 1, 5},
      {UnaryOp::kAtanh, [](double x) { return std::atanh(x); }, -0.9, 0.9},
      {UnaryOp::kFloor, [](double x) { return std::floor(x); }, -3, 3},
      {UnaryOp::kCeil, [](double x) { return std::ceil(x); }, -3, 3},
      {UnaryOp::kSign, [](double x) { return double((x > 0) - (x < 0)); }, -3, 3},
      {UnaryOp::kHardSwish, [](double x) { return x * std::max(0.0, std::min(1.0, x / 6 + 0.5)); }, -5, 5},
      {UnaryOp::kMish, [](double x) { return x * std::tanh(std::log(1 + std::exp(x))); }, -5, 5},
      {UnaryOp::kGelu, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -4, 4},
  };
  for (const auto& c : cases) {
    const int64_t n = 40000;  // more than one parallel chunk
    auto xd = Uniform(n, c.lo, c.hi);
    auto x = To<float>(xd);
    std::vector<float> y(n);
    Unary<float>(c.op, x.data(), y.data(), n);
    auto xdd = To<double>(xd);
    std::vector<double> yd(n);
    Unary<double>(c.op, xdd.data(), yd.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      double want = c.ref(static_cast<double>(x[i]));
      ASSERT_NEAR(y[i], want, 1e-5 + 1e-5 * std::fabs(want)) << "op " << int(c.op) << " x=" << x[i];
      ASSERT_NEAR(yd[i], c.ref(xdd[i]), 1e-12 + 1e-12 * std::fabs(want)) << "double op " << int(c.op);
    }
  }
}

TEST(ElementwiseUnary, AttributesAndHalfTypes) {
  const int64_t n = 1000;
  auto xd = Uniform(n, -3, 3);
  auto x = To<float16>(xd);
  std::vector<float16> y(n);
  UnaryParams p;
  p.alpha = 0.3f;
  Unary<float16>(UnaryOp::kLeakyRelu, x.data(), y.data(), n, p);
  for (int64_t i = 0; i < n; ++i) {
    double v = float(x[i]), want = v < 0 ? 0.3 * v : v;
    ASSERT_NEAR(float(y[i]), want, 2e-3 * std::fabs(want) + 1e-6);
  }
  p.alpha = 1.67326319217681884765625f;
  p.gamma = 1.05070102214813232421875f;
  auto xb = To<bfloat16>(xd);
  std::vector<bfloat16> yb(n);
  Unary<bfloat16>(UnaryOp::kSelu, xb.data(), yb.data(), n, p);
  for (int64_t i = 0; i < n; ++i) {
    double v = float(xb[i]);
    double want = v > 0 ? p.gamma * v : p.gamma * (p.alpha * std::exp(v) - p.alpha);
    ASSERT_NEAR(float(yb[i]), want, 1e-2 * std::fabs(want) + 1e-6);
  }
  // Shrink: lambd 1.5, bias 0.5.
  p = {};
  p.alpha = 1.5f;
  p.beta = 0.5f;
  std::vector<float> xs = {-3, -1.5f, -1, 0, 1, 1.5f, 2, 3};
  std::vector<float> ys(xs.size());
  Unary<float>(UnaryOp::kShrink, xs.data(), ys.data(), xs.size(), p);
  EXPECT_EQ(ys, (std::vector<float>{-2.5f, 0, 0, 0, 0, 0, 1.5f, 2.5f}));
}

TEST(ElementwiseUnary, RoundIsHalfToEven) {
  std::vector<float> x = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, 2.6f, -2.5f};
  std::vector<float> y(x.size());
  Unary<float>(UnaryOp::kRound, x.data(), y.data(), x.size());
  EXPECT_EQ(y, (std::vector<float>{0, 2, 2, -0.f, -2, 2, 3, -2}));
}

TEST(ElementwiseUnary, IntegerOpsWrapAndIsInfFlags) {
  std::vector<int8_t> x = {-128, -5, 0, 7, 127};
  std::vector<int8_t> y(x.size());
  Unary<int8_t>(UnaryOp::kAbs, x.data(), y.data(), x.size());
  EXPECT_EQ(y, (std::vector<int8_t>{-128, 5, 0, 7, 127}));
  Unary<int8_t>(UnaryOp::kNeg, x.data(), y.data(), x.size());
  EXPECT_EQ(y, (std::vector<int8_t>{-128, 5, 0, -7, -127}));
  Unary<int8_t>(UnaryOp::kSign, x.data(), y.data(), x.size());
  EXPECT_EQ(y, (std::vector<int8_t>{-1, -1, 0, 1, 1}));
  EXPECT_FALSE(UnarySupportsIntegers(UnaryOp::kExp));
  EXPECT_TRUE(UnarySupportsIntegers(UnaryOp::kRelu));

  std::vector<float> f = {1.f, INFINITY, -INFINITY, NAN};
  bool b[4];
  IsInf<float>(f.data(), b, 4, true, false);
  EXPECT_EQ(std::vector<bool>(b, b + 4), (std::vector<bool>{false, true, false, false}));
  IsInf<float>(f.data(), b, 4, false, true);
  EXPECT_EQ(std::vector<bool>(b, b + 4), (std::vector<bool>{false, false, true, false}));
  IsNaN<float>(f.data(), b, 4);
  EXPECT_EQ(std::vector<bool>(b, b + 4), (std::vector<bool>{false, false, false, true}));
}

TEST(ElementwiseUnary, ClipMinAboveMaxGivesMax) {
  std::vector<float> x = {-2, 0, 2, NAN};
  std::vector<float> y(4);
  Clip<float>(x.data(), y.data(), 4, -1.f, 1.f);
  EXPECT_EQ(y[0], -1.f);
  EXPECT_EQ(y[1], 0.f);
  EXPECT_EQ(y[2], 1.f);
  EXPECT_TRUE(std::isnan(y[3]));
  Clip<float>(x.data(), y.data(), 3, 2.f, 1.f);
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], 1.f);
  std::vector<uint8_t> xi = {0, 10, 200};
  std::vector<uint8_t> yi(3);
  Clip<uint8_t>(xi.data(), yi.data(), 3, 5, 100);
  EXPECT_EQ(yi, (std::vector<uint8_t>{5, 10, 100}));
}

TEST(ElementwiseDropout, KeepsRatioScalesAndRepeatsPerKey) {
  const int64_t n = 100000;
  std::vector<float> x(n, 2.f), y(n), y2(n);
  std::vector<bool> dummy;
  std::unique_ptr<bool[]> m(new bool[n]);
  DropoutTrain<float, bool>(x.data(), y.data(), m.get(), n, 0.25f, 7);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    kept += m[i];
    ASSERT_EQ(y[i], m[i] ? 2.f / 0.75f : 0.f);
  }
  EXPECT_NEAR(double(kept) / n, 0.75, 0.01);
  DropoutTrain<float, bool>(x.data(), y2.data(), nullptr, n, 0.25f, 7);
  EXPECT_EQ(y, y2);  // same key, same draws
  DropoutTrain<float, bool>(x.data(), y2.data(), nullptr, n, 0.25f, 8);
  EXPECT_NE(y, y2);  // another key, other draws
  // ratio 0: exact identity and all-true mask.
  auto xd = To<float>(Uniform(n, -1, 1));
  DropoutTrain<float, bool>(xd.data(), y.data(), m.get(), n, 0.f, 9);
  EXPECT_EQ(y, xd);
  for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(m[i]);
}

// Naive broadcast binary reference over doubles.
template <typename F>
std::vector<double> RefBinary(const std::vector<double>& a, const std::vector<int64_t>& ad,
                              const std::vector<double>& b, const std::vector<int64_t>& bd,
                              const std::vector<int64_t>& od, F f) {
  std::vector<double> r(Numel(od));
  for (int64_t i = 0; i < Numel(od); ++i) r[i] = f(a[BroadcastOffset(i, ad, od)], b[BroadcastOffset(i, bd, od)]);
  return r;
}

TEST(ElementwiseBinary, BroadcastShapesMatchReference) {
  struct Shapes {
    std::vector<int64_t> a, b, out;
  };
  const std::vector<Shapes> shapes = {
      {{3, 4, 5}, {3, 4, 5}, {3, 4, 5}}, {{3, 4, 5}, {}, {3, 4, 5}},  {{3, 4, 5}, {5}, {3, 4, 5}},
      {{3, 1, 5}, {4, 1}, {3, 4, 5}},    {{1}, {2, 3}, {2, 3}},       {{2, 1, 3, 1}, {1, 4, 1, 5}, {2, 4, 3, 5}},
      {{70, 300}, {70, 1}, {70, 300}},   {{4, 0, 3}, {3}, {4, 0, 3}}, {{}, {}, {}},
  };
  for (const auto& s : shapes) {
    auto ad = Uniform(Numel(s.a), -3, 3), bd = Uniform(Numel(s.b), 0.5, 3);
    auto a = To<float>(ad), b = To<float>(bd);
    ad = To<double>(std::vector<double>(a.begin(), a.end()));
    bd = To<double>(std::vector<double>(b.begin(), b.end()));
    auto plan = MakeBroadcastPlan(s.out, {s.a, s.b});
    std::vector<float> out(Numel(s.out));
    Binary<float>(BinaryOp::kSub, a.data(), b.data(), out.data(), plan);
    auto want = RefBinary(ad, s.a, bd, s.b, s.out, [](double x, double y) { return x - y; });
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-5) << i;
    Binary<float>(BinaryOp::kDiv, a.data(), b.data(), out.data(), plan);
    want = RefBinary(ad, s.a, bd, s.b, s.out, [](double x, double y) { return x / y; });
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-5 * (1 + std::fabs(want[i])));
    std::unique_ptr<bool[]> cmp(new bool[out.size() + 1]);
    Binary<float>(BinaryOp::kGreater, a.data(), b.data(), cmp.get(), plan);
    want = RefBinary(ad, s.a, bd, s.b, s.out, [](double x, double y) { return double(x > y); });
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(cmp[i], want[i] != 0);
  }
  EXPECT_THROW(MakeBroadcastPlan({3, 4}, {{3, 4}, {3}}), std::invalid_argument);
}

TEST(ElementwiseBinary, IntegerDivTruncatesAndModFollowsSignRules) {
  std::vector<int32_t> a = {7, -7, 7, -7, 5, 4};
  std::vector<int32_t> b = {2, 2, -2, -2, 0, 3};
  std::vector<int32_t> out(6);
  auto plan = MakeBroadcastPlan({6}, {{6}, {6}});
  Binary<int32_t>(BinaryOp::kDiv, a.data(), b.data(), out.data(), plan);
  EXPECT_EQ(out, (std::vector<int32_t>{3, -3, -3, 3, 0, 1}));
  Binary<int32_t>(BinaryOp::kMod, a.data(), b.data(), out.data(), plan);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 1, -1, -1, 0, 1}));
  Binary<int32_t>(BinaryOp::kFmod, a.data(), b.data(), out.data(), plan);
  EXPECT_EQ(out, (std::vector<int32_t>{1, -1, 1, -1, 0, 1}));
  std::vector<double> fa = {5.5, -5.5}, fb = {-2, 2}, fo(2);
  auto p2 = MakeBroadcastPlan({2}, {{2}, {2}});
  Binary<double>(BinaryOp::kMod, fa.data(), fb.data(), fo.data(), p2);
  EXPECT_EQ(fo, (std::vector<double>{-0.5, 0.5}));
  Binary<double>(BinaryOp::kFmod, fa.data(), fb.data(), fo.data(), p2);
  EXPECT_EQ(fo, (std::vector<double>{1.5, -1.5}));
  std::vector<uint8_t> ua = {200, 16}, ub = {100, 2}, uo(2);
  Binary<uint8_t>(BinaryOp::kAdd, ua.data(), ub.data(), uo.data(), p2);
  EXPECT_EQ(uo, (std::vector<uint8_t>{44, 18}));  // wraps
  Binary<uint8_t>(BinaryOp::kShiftRight, ua.data(), ub.data(), uo.data(), p2);
  EXPECT_EQ(uo, (std::vector<uint8_t>{0, 4}));
  Binary<uint8_t>(BinaryOp::kShiftLeft, ua.data(), ub.data(), uo.data(), p2);
  EXPECT_EQ(uo, (std::vector<uint8_t>{0, 64}));
}

TEST(ElementwiseBinary, PowMixedTypes) {
  std::vector<float> a = {2, 3, 0.5f};
  std::vector<int64_t> e = {3, -1, 2};
  std::vector<float> out(3);
  auto plan = MakeBroadcastPlan({3}, {{3}, {3}});
  Pow<float, int64_t>(a.data(), e.data(), out.data(), plan);
  EXPECT_FLOAT_EQ(out[0], 8.f);
  EXPECT_FLOAT_EQ(out[1], 1.f / 3);
  EXPECT_FLOAT_EQ(out[2], 0.25f);
  std::vector<int32_t> ia = {2, 3, -2};
  std::vector<float> fe = {3.f, 0.5f, 2.f};
  std::vector<int32_t> io(3);
  Pow<int32_t, float>(ia.data(), fe.data(), io.data(), plan);
  EXPECT_EQ(io, (std::vector<int32_t>{8, 1, 4}));  // sqrt(3) truncates to 1
  std::vector<int64_t> le = {40, 2, 3};
  std::vector<int64_t> la = {3, -5, -2}, lo(3);
  Pow<int64_t, int64_t>(la.data(), le.data(), lo.data(), plan);
  EXPECT_EQ(lo, (std::vector<int64_t>{static_cast<int64_t>(12157665459056928801ULL), 25, -8}));  // 3^40 wraps
}

// x^2 with one exponent for all (a multiply in float) gives exactly pow in double rounded to float: random values
// and the edges (signed zeros, infinities, NaN, squares that overflow, turn subnormal or vanish); bfloat16 too.
TEST(ElementwiseBinary, PowOfTwoIsThePowInDouble) {
  std::vector<float> a = To<float>(Uniform(4096, -100, 100));
  const float edges[] = {0.f, -0.f, INFINITY, -INFINITY, NAN, 1e20f, -3e19f, 1e-20f, -2e-23f, 1e-30f};
  for (int i = 0; i < 10; ++i) a[static_cast<size_t>(i) * 17] = edges[i];
  const std::vector<float> two = {2.f};
  std::vector<float> out(a.size());
  const auto plan = MakeBroadcastPlan({4096}, {{4096}, {}});
  Pow<float, float>(a.data(), two.data(), out.data(), plan);
  for (size_t i = 0; i < a.size(); ++i) {
    const float want = static_cast<float>(std::pow(static_cast<double>(a[i]), 2.0));
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(out[i])) << a[i];
    else
      EXPECT_EQ(std::memcmp(&out[i], &want, sizeof want), 0) << a[i] << ": " << out[i] << " vs " << want;
  }
  std::vector<bfloat16> h(a.size()), ho(a.size());
  for (size_t i = 0; i < a.size(); ++i) h[i] = bfloat16(a[i]);
  const std::vector<bfloat16> two_h = {bfloat16(2.f)};
  Pow<bfloat16, bfloat16>(h.data(), two_h.data(), ho.data(), plan);
  for (size_t i = 0; i < a.size(); ++i) {
    const float want =
        static_cast<float>(bfloat16(static_cast<float>(std::pow(static_cast<double>(float(h[i])), 2.0))));
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(float(ho[i])));
    else
      EXPECT_EQ(float(ho[i]), want) << float(h[i]);
  }
}

TEST(ElementwiseVariadic, FoldsWithBroadcastAndWhere) {
  std::vector<int64_t> out_dims = {3, 4};
  auto a = To<float>(Uniform(12, -2, 2)), b = To<float>(Uniform(4, -2, 2)), c = To<float>(Uniform(3, -2, 2));
  auto plan = MakeBroadcastPlan(out_dims, {{3, 4}, {4}, {3, 1}});
  std::vector<float> out(12);
  Variadic<float>(VariadicOp::kMean, {a.data(), b.data(), c.data()}, out.data(), plan);
  for (int i = 0; i < 12; ++i) ASSERT_NEAR(out[i], (a[i] + b[i % 4] + c[i / 4]) / 3.0, 1e-6);
  Variadic<float>(VariadicOp::kMax, {a.data(), b.data(), c.data()}, out.data(), plan);
  for (int i = 0; i < 12; ++i) ASSERT_EQ(out[i], std::max({a[i], b[i % 4], c[i / 4]}));
  // In place: output aliases the full-shape operand.
  std::vector<float> acc = a;
  Variadic<float>(VariadicOp::kSum, {b.data(), acc.data(), c.data()}, acc.data(),
                  MakeBroadcastPlan(out_dims, {{4}, {3, 4}, {3, 1}}));
  for (int i = 0; i < 12; ++i) ASSERT_NEAR(acc[i], a[i] + b[i % 4] + c[i / 4], 1e-5);

  bool cond[4] = {true, false, false, true};
  std::vector<int64_t> x = {1, 2, 3}, y = {10, 20, 30}, w(12);
  Where<int64_t>(cond, x.data(), y.data(), w.data(), MakeBroadcastPlan({4, 3}, {{4, 1}, {3}, {3}}));
  EXPECT_EQ(w, (std::vector<int64_t>{1, 2, 3, 10, 20, 30, 10, 20, 30, 1, 2, 3}));
}

TEST(ElementwiseCast, ConversionsRoundTruncateAndWrap) {
  std::vector<float> f = {1.9f, -1.9f, 300.5f, 0.f, NAN, 65520.f, 1e-8f};
  std::vector<int32_t> i(f.size());
  Cast<float, int32_t>(f.data(), i.data(), 4);
  EXPECT_EQ(std::vector<int32_t>(i.begin(), i.begin() + 4), (std::vector<int32_t>{1, -1, 300, 0}));
  std::vector<uint8_t> u(4);
  Cast<float, uint8_t>(f.data(), u.data(), 4);
  EXPECT_EQ(u, (std::vector<uint8_t>{1, 255, 44, 0}));
  std::vector<float16> h(f.size());
  Cast<float, float16>(f.data(), h.data(), f.size());
  EXPECT_EQ(float(h[0]), 1.900390625f);
  EXPECT_TRUE(std::isnan(float(h[4])));
  EXPECT_TRUE(std::isinf(float(h[5])));
  std::unique_ptr<bool[]> b(new bool[f.size()]);
  Cast<float, bool>(f.data(), b.get(), f.size());
  EXPECT_TRUE(b[0] && b[1] && !b[3] && b[4] && b[6]);
  std::vector<double> d(3);
  bool bs[3] = {true, false, true};
  Cast<bool, double>(bs, d.data(), 3);
  EXPECT_EQ(d, (std::vector<double>{1, 0, 1}));
  std::vector<bfloat16> bf(2);
  std::vector<double> dd = {1.0 / 3, -256.5};
  Cast<double, bfloat16>(dd.data(), bf.data(), 2);
  EXPECT_EQ(float(bf[0]), 0.333984375f);
  EXPECT_EQ(float(bf[1]), -256.f);
  std::vector<int64_t> big = {300, -1};
  std::vector<int8_t> small(2);
  Cast<int64_t, int8_t>(big.data(), small.data(), 2);
  EXPECT_EQ(small, (std::vector<int8_t>{44, -1}));
}

}  // namespace
}  // namespace ot::cpu
