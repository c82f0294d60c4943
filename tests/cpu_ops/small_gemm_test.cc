// cpu_ops/small_gemm: the batched small-matrix float32 GEMM against NaiveMatMul with float64 accumulation, on fresh
// random shapes (edges of the 4 x 16 tile: m and n not multiples of it, k from 1), every transpose combination,
// batch dims broadcast on either side, alpha and accumulation. The output is pre-filled with NaN (unless
// accumulating), so an element the kernel does not write fails.
#include "cpu_ops/small_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace ot::cpu {
namespace {

std::mt19937_64& Rng() {
  static std::mt19937_64 r(std::random_device{}());
  return r;
}

std::vector<float> Random(int64_t n) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(Rng());
  return v;
}

int64_t Prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t d : v) p *= d;
  return p;
}

void Check(const MatMulSpec& s) {
  SCOPED_TRACE("m " + std::to_string(s.m) + " k " + std::to_string(s.k) + " n " + std::to_string(s.n) + " ta " +
               std::to_string(s.trans_a) + " tb " + std::to_string(s.trans_b) + " alpha " + std::to_string(s.alpha) +
               " acc " + std::to_string(s.accumulate));
  ASSERT_TRUE(SmallGemmApplies(s));
  std::vector<int64_t> cb(s.a_batch.size());
  for (size_t i = 0; i < cb.size(); ++i) cb[i] = std::max(s.a_batch[i], s.b_batch[i]);
  const std::vector<float> a = Random(Prod(s.a_batch) * s.m * s.k), b = Random(Prod(s.b_batch) * s.k * s.n);
  const int64_t nc = Prod(cb) * s.m * s.n;
  std::vector<float> c = s.accumulate ? Random(nc) : std::vector<float>(static_cast<size_t>(nc), std::nanf(""));
  std::vector<float> want = c;
  NaiveMatMul<float, double>(s, a.data(), b.data(), want.data());
  SmallBatchedGemm(s, a.data(), b.data(), c.data());
  int bad = 0;
  for (int64_t i = 0; i < nc; ++i) {
    const double tol = 1e-6 * (1 + std::sqrt(static_cast<double>(s.k))) * (1 + std::fabs(want[static_cast<size_t>(i)]));
    if (!(std::fabs(c[static_cast<size_t>(i)] - want[static_cast<size_t>(i)]) <= tol) && ++bad <= 5)
      ADD_FAILURE() << "element " << i << ": " << c[static_cast<size_t>(i)] << " vs " << want[static_cast<size_t>(i)];
  }
  EXPECT_EQ(bad, 0);
}

TEST(SmallGemm, MatchesAFloat64ReferenceOnRandomShapes) {
  std::uniform_int_distribution<int64_t> mn(1, 64), kd(1, 96), bd(1, 4);
  for (int rep = 0; rep < 40; ++rep) {
    MatMulSpec s;
    s.m = mn(Rng());
    s.n = mn(Rng());
    s.k = kd(Rng());
    s.trans_a = rep % 2;
    s.trans_b = (rep / 2) % 2;
    const int64_t b0 = bd(Rng()), b1 = bd(Rng());
    s.a_batch = {b0, b1};
    s.b_batch = {b0, b1};
    if (rep % 5 == 1) s.b_batch[0] = 1;  // B broadcast along the outer batch dim
    if (rep % 5 == 2) s.a_batch[1] = 1;  // A broadcast along the inner one
    if (rep % 7 == 3) s.alpha = 0.375f;
    s.accumulate = rep % 6 == 4;
    Check(s);
  }
}

TEST(SmallGemm, AttentionShapesAndTileEdges) {
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{32, 16, 32},
                         {32, 32, 16},
                         {16, 32, 32},
                         {4, 256, 16},
                         {5, 3, 17},
                         {64, 64, 64},
                         {1, 1, 1}})
    for (int t = 0; t < 4; ++t) {
      MatMulSpec s;
      s.m = m, s.k = k, s.n = n;
      s.trans_a = t & 1;
      s.trans_b = t & 2;
      s.a_batch = {8, 4};
      s.b_batch = {8, 4};
      Check(s);
    }
}

TEST(SmallGemm, AppliesOnlyToBatchedSmallFloat32) {
  MatMulSpec s;
  s.m = s.n = 64;
  s.k = 256;
  s.a_batch = s.b_batch = {2};
  EXPECT_TRUE(SmallGemmApplies(s));
  s.a_batch = s.b_batch = {};
  EXPECT_FALSE(SmallGemmApplies(s)) << "a single matrix goes to oneDNN";
  s.a_batch = s.b_batch = {2};
  s.m = 65;
  EXPECT_FALSE(SmallGemmApplies(s));
  s.m = 64;
  s.k = 257;
  EXPECT_FALSE(SmallGemmApplies(s));
  s.k = 256;
  s.type = DnnType::kBF16;
  EXPECT_FALSE(SmallGemmApplies(s));
}

}  // namespace
}  // namespace ot::cpu
