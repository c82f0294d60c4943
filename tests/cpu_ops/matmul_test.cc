// DnnlMatMul / NaiveMatMul against a double reference: batch broadcasting, transposes, alpha, accumulate,
// half types (converted when the CPU has no native kernel), K = 0.
#include "cpu_ops/matmul.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <thread>

#include "cpu_ops/dnnl_util.h"
#include "cpu_ops/threads.h"
#include "kernel_common/half.h"

namespace ot::cpu {
namespace {

std::vector<float> Rand(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

int64_t Prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (auto x : v) p *= x;
  return p;
}

// Reference: C = alpha * op(A) op(B) (+ C0) over broadcast batches, in double.
std::vector<double> Reference(const MatMulSpec& s, const std::vector<float>& a, const std::vector<float>& b,
                              const std::vector<float>& c0) {
  const size_t nb = s.a_batch.size();
  std::vector<int64_t> cb(nb);
  for (size_t i = 0; i < nb; ++i) cb[i] = std::max(s.a_batch[i], s.b_batch[i]);
  const int64_t batches = Prod(cb);
  std::vector<double> c(batches * s.m * s.n);
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t rem = bi, ab = 0, bb = 0, am = 1, bm = 1;
    for (int d = static_cast<int>(nb) - 1; d >= 0; --d) {
      const int64_t idx = rem % cb[d];
      rem /= cb[d];
      ab += (s.a_batch[d] == 1 ? 0 : idx) * am;
      bb += (s.b_batch[d] == 1 ? 0 : idx) * bm;
      am *= s.a_batch[d];
      bm *= s.b_batch[d];
    }
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < s.k; ++k) {
          const double av = s.trans_a ? a[ab * s.m * s.k + k * s.m + i] : a[ab * s.m * s.k + i * s.k + k];
          const double bv = s.trans_b ? b[bb * s.k * s.n + j * s.k + k] : b[bb * s.k * s.n + k * s.n + j];
          acc += av * bv;
        }
        const int64_t o = (bi * s.m + i) * s.n + j;
        c[o] = s.alpha * acc + (s.accumulate ? c0[o] : 0.0);
      }
  }
  return c;
}

void CheckF32(const MatMulSpec& s, uint64_t seed) {
  const int64_t na = Prod(s.a_batch) * s.m * s.k, nb = Prod(s.b_batch) * s.k * s.n;
  std::vector<int64_t> cb(s.a_batch.size());
  for (size_t i = 0; i < cb.size(); ++i) cb[i] = std::max(s.a_batch[i], s.b_batch[i]);
  const int64_t nc = Prod(cb) * s.m * s.n;
  auto a = Rand(na, seed), b = Rand(nb, seed + 1), c0 = Rand(nc, seed + 2);
  auto ref = Reference(s, a, b, c0);
  std::vector<float> c = c0;
  DnnlMatMul(s).Run(a.data(), b.data(), c.data());
  std::vector<float> c2 = c0;
  NaiveMatMul<float, double>(s, a.data(), b.data(), c2.data());
  for (int64_t i = 0; i < nc; ++i) {
    ASSERT_NEAR(c[i], ref[i], 1e-4 + 1e-4 * std::abs(ref[i])) << "dnnl element " << i;
    ASSERT_NEAR(c2[i], ref[i], 1e-5 + 1e-5 * std::abs(ref[i])) << "naive element " << i;
  }
}

TEST(MatMulKernel, Plain2D) {
  MatMulSpec s;
  s.m = 7, s.k = 13, s.n = 5;
  CheckF32(s, 1);
}

TEST(MatMulKernel, BatchBroadcastBothSides) {
  MatMulSpec s;
  s.a_batch = {2, 1, 3};
  s.b_batch = {1, 4, 3};
  s.m = 3, s.k = 6, s.n = 4;
  CheckF32(s, 2);
}

TEST(MatMulKernel, TransposedWithAlphaAndAccumulate) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      MatMulSpec s;
      s.a_batch = {2};
      s.b_batch = {2};
      s.m = 5, s.k = 9, s.n = 3;
      s.trans_a = ta, s.trans_b = tb;
      s.alpha = 0.5f;
      s.accumulate = true;
      CheckF32(s, 10 + ta * 2 + tb);
    }
}

// v rounded to the half type t (in place, so a reference sees the values the kernel reads); returns their bits.
std::vector<uint16_t> RoundToHalf(DnnType t, std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  FromFloat(t, v.data(), h.data(), v.size());
  ToFloat(t, h.data(), v.data(), v.size());
  return h;
}

TEST(MatMulKernel, HalfTypesMatchFloatWithinRounding) {
  MatMulSpec s;
  s.m = 4, s.k = 16, s.n = 6;
  auto a = Rand(s.m * s.k, 3), b = Rand(s.k * s.n, 4);
  for (DnnType t : {DnnType::kF16, DnnType::kBF16}) {
    // Round inputs to the half type first so the reference sees the same values.
    std::vector<float> ar = a, br = b;
    const std::vector<uint16_t> ah = RoundToHalf(t, ar), bh = RoundToHalf(t, br);
    std::vector<uint16_t> ch(s.m * s.n);
    MatMulSpec st = s;
    st.type = t;
    DnnlMatMul(st).Run(ah.data(), bh.data(), ch.data());
    std::vector<float> c(ch.size());
    ToFloat(t, ch.data(), c.data(), ch.size());
    auto ref = Reference(s, ar, br, {});
    const double tol = t == DnnType::kF16 ? 2e-3 : 1e-2;
    for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], ref[i], tol * (1 + std::abs(ref[i])));
  }
}

// A half product with a transposed A (a weight gradient, A^T dY) and K below 768 is one oneDNN call (no blocks: brgemm
// takes the whole transposed A, not a block of it), native where oneDNN has a jit kernel: it matches the double
// reference on the rounded inputs, every element written (C starts as NaN), batched or not, at 1 and 2 threads, with
// the plan's workspace and without.
TEST(MatMulKernel, HalfTransposedAMatchesTheReference) {
  const int saved = IntraOpThreads();
  for (int threads : {1, 2})
    for (const auto& [batch, m, k, n] :
         std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{{1, 512, 384, 256}, {3, 40, 72, 24}})
      for (DnnType t : {DnnType::kBF16, DnnType::kF16}) {
        SetOmpThreads(threads);
        MatMulSpec s;
        s.m = m, s.k = k, s.n = n, s.trans_a = true, s.type = t;
        if (batch > 1) s.a_batch = s.b_batch = {batch};
        SCOPED_TRACE(std::to_string(threads) + " threads, batch " + std::to_string(batch) + ", type " +
                     std::to_string(static_cast<int>(t)));
        auto a = Rand(batch * m * k, 50 + batch), b = Rand(batch * k * n, 60 + batch);
        const std::vector<uint16_t> ah = RoundToHalf(t, a), bh = RoundToHalf(t, b);
        MatMulSpec f = s;
        f.type = DnnType::kF32;
        const auto ref = Reference(f, a, b, {});
        DnnlMatMul mm(s);
        EXPECT_EQ(mm.blocks(), 1);
        MatMulSpec plain = s;
        plain.trans_a = false;
        if (DnnlMatMul(plain).impl_name().rfind("brg:", 0) == 0) {  // brgemm for A plain: for A transposed too
          EXPECT_EQ(mm.impl_name().rfind("brg:", 0), 0u) << mm.impl_name();
        }
        std::vector<uint8_t> ws(mm.workspace_bytes() + 64);
        void* w = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) & ~uintptr_t{63});
        for (int run = 0; run < 2; ++run) {
          std::vector<uint16_t> ch(ref.size());
          const uint16_t nan_bits = t == DnnType::kBF16 ? 0x7fc0 : 0x7e00;
          std::fill(ch.begin(), ch.end(), nan_bits);
          mm.Run(ah.data(), bh.data(), ch.data(), run == 0 ? w : nullptr);
          std::vector<float> c(ch.size());
          ToFloat(t, ch.data(), c.data(), ch.size());
          const double tol = t == DnnType::kF16 ? 2e-3 : 1e-2;
          for (size_t i = 0; i < c.size(); ++i)
            ASSERT_NEAR(c[i], ref[i], tol * (1 + std::abs(ref[i]))) << "element " << i << " of " << mm.impl_name();
        }
      }
  SetOmpThreads(saved);
}

// oneDNN fixes a primitive's work split for the OpenMP team size of the thread that creates it, so a kernel built
// on a thread whose team size is not --threads' must set it before creating the primitive: on 2 cores with
// --threads 1, GEMMs made for 2 threads ran up to twice as long (bench/fuse_ab.cc).
TEST(MatMulKernel, PrimitiveIsMadeForTheConfiguredTeamSize) {
  const int saved = IntraOpThreads();
  SetOmpThreads(1);
  int team_at_creation = -1;
  std::thread builder([&] {
    omp_set_num_threads(3);  // a thread whose team size differs, as a fresh TBB worker's may
    MatMulSpec s;
    s.m = s.k = s.n = 16;
    DnnlMatMul mm(s);
    team_at_creation = omp_get_max_threads();
  });
  builder.join();
  SetOmpThreads(saved);
  EXPECT_EQ(team_at_creation, 1);
}

// With more than one thread a large enough unbatched GEMM runs as row blocks of C, one oneDNN call per block on its
// own thread (the last block shorter when the rows do not divide): every element written (C starts as NaN unless
// accumulating), the double reference matched, and the one-call result of one thread matched to rounding.
TEST(MatMulKernel, RowBlocksOnSeveralThreads) {
  const int saved = IntraOpThreads();
  int case_no = 0;
  for (int threads : {2, 3})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int acc = 0; acc < 2; ++acc) {
          MatMulSpec s;
          s.m = 301, s.k = 64, s.n = 60;  // 2.3 MFLOP; 3 threads: blocks of 101, 101 and 99 rows
          s.trans_a = ta, s.trans_b = tb, s.accumulate = acc;
          s.alpha = acc ? 0.75f : 1.f;
          SCOPED_TRACE("threads " + std::to_string(threads) + " trans_a " + std::to_string(ta) + " trans_b " +
                       std::to_string(tb) + " accumulate " + std::to_string(acc));
          const uint64_t seed = 100 + 4 * case_no++;
          auto a = Rand(s.m * s.k, seed), b = Rand(s.k * s.n, seed + 1), c0 = Rand(s.m * s.n, seed + 2);
          const auto ref = Reference(s, a, b, c0);
          SetOmpThreads(1);
          std::vector<float> one = acc ? c0 : std::vector<float>(c0.size(), NAN);
          DnnlMatMul single(s);
          ASSERT_EQ(single.blocks(), 1);
          single.Run(a.data(), b.data(), one.data());
          SetOmpThreads(threads);
          DnnlMatMul split(s);
          ASSERT_EQ(split.blocks(), threads);
          std::vector<uint8_t> ws(split.workspace_bytes() + 64);
          void* w = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) & ~uintptr_t{63});
          for (int run = 0; run < 2; ++run) {  // the plan's workspace, then the object's own scratchpads
            std::vector<float> c = acc ? c0 : std::vector<float>(c0.size(), NAN);
            split.Run(a.data(), b.data(), c.data(), run == 0 ? w : nullptr);
            for (size_t i = 0; i < c.size(); ++i) {
              ASSERT_NEAR(c[i], ref[i], 1e-4 + 1e-4 * std::abs(ref[i])) << "element " << i;
              ASSERT_NEAR(c[i], one[i], 1e-5 + 1e-5 * std::abs(one[i])) << "element " << i;
            }
          }
        }
  SetOmpThreads(saved);
}

// A large half product with a transposed A (a weight gradient over many rows: K >= 768, >= 1.5 GFLOP) runs as
// column blocks of C on several threads, the last block narrower when the columns do not divide: every element
// written (C starts as NaN unless accumulating), the double reference on the rounded operands matched (every column
// of every 16th row), with the plan's workspace and without; with K = 512 or a tenth of the columns it stays one call.
TEST(MatMulKernel, ColumnBlocksOfALargeHalfTransposedAProduct) {
  const int saved = IntraOpThreads();
  int case_no = 0;
  for (int threads : {2, 3})
    for (DnnType t : {DnnType::kBF16, DnnType::kF16})
      for (int tb = 0; tb < 2; ++tb) {
        const bool acc = tb;
        MatMulSpec s;
        s.m = 768, s.k = 776, s.n = 1280;  // 1.53 GFLOP; 3 threads: blocks of 427, 427 and 426 columns
        s.type = t, s.trans_a = true, s.trans_b = tb, s.accumulate = acc;
        s.alpha = acc ? 0.75f : 1.f;
        SCOPED_TRACE("threads " + std::to_string(threads) + " type " + std::to_string(static_cast<int>(t)) +
                     " trans_b " + std::to_string(tb) + " accumulate " + std::to_string(acc));
        const uint64_t seed = 300 + 4 * case_no++;
        auto a = Rand(s.m * s.k, seed), b = Rand(s.k * s.n, seed + 1), c0 = Rand(s.m * s.n, seed + 2);
        const std::vector<uint16_t> ah = RoundToHalf(t, a), bh = RoundToHalf(t, b), c0h = RoundToHalf(t, c0);
        MatMulSpec sampled = s;  // the reference's rows: every 16th (A's columns, A being stored transposed)
        sampled.type = DnnType::kF32;
        sampled.m = s.m / 16;
        std::vector<float> a_rows(sampled.m * s.k), c0_rows(sampled.m * s.n);
        for (int64_t i = 0; i < sampled.m; ++i) {
          for (int64_t k = 0; k < s.k; ++k) a_rows[k * sampled.m + i] = a[k * s.m + 16 * i];
          for (int64_t j = 0; j < s.n; ++j) c0_rows[i * s.n + j] = c0[16 * i * s.n + j];
        }
        const auto ref = Reference(sampled, a_rows, b, c0_rows);
        SetOmpThreads(threads);
        DnnlMatMul mm(s);
        ASSERT_EQ(mm.blocks(), threads);
        ASSERT_TRUE(mm.column_blocks());
        MatMulSpec short_k = s, narrow = s;
        short_k.k = 512;
        narrow.n = s.n / 10;
        EXPECT_EQ(DnnlMatMul(short_k).blocks(), 1);
        EXPECT_EQ(DnnlMatMul(narrow).blocks(), 1);
        std::vector<uint8_t> ws(mm.workspace_bytes() + 64);
        void* w = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) & ~uintptr_t{63});
        for (int run = 0; run < 2; ++run) {  // the plan's workspace, then the object's own scratchpads
          const uint16_t nan_bits = t == DnnType::kBF16 ? 0x7fc0 : 0x7e00;
          std::vector<uint16_t> ch = acc ? c0h : std::vector<uint16_t>(c0.size(), nan_bits);
          mm.Run(ah.data(), bh.data(), ch.data(), run == 0 ? w : nullptr);
          std::vector<float> c(ch.size());
          ToFloat(t, ch.data(), c.data(), ch.size());
          for (size_t i = 0; i < c.size(); ++i) ASSERT_FALSE(std::isnan(c[i])) << "element " << i << " not written";
          const double tol = t == DnnType::kF16 ? 2e-3 : 1e-2;
          for (int64_t i = 0; i < sampled.m; ++i)
            for (int64_t j = 0; j < s.n; ++j) {
              const double r = ref[i * s.n + j];
              ASSERT_NEAR(c[16 * i * s.n + j], r, tol * (1 + std::abs(r)))
                  << "row " << 16 * i << " column " << j << " of " << mm.impl_name();
            }
        }
      }
  SetOmpThreads(saved);
}

// Row blocks of a bf16 GEMM computed in f32 on converted copies, and the cases that stay one call: batched, small.
TEST(MatMulKernel, RowBlocksOfConvertedHalfAndWhereNotUsed) {
  const int saved = IntraOpThreads();
  SetOmpThreads(2);
  MatMulSpec s;
  s.m = 256, s.k = 64, s.n = 64, s.type = DnnType::kBF16;
  auto a = Rand(s.m * s.k, 7), b = Rand(s.k * s.n, 8);
  std::vector<uint16_t> ah(a.size()), bh(b.size()), ch(s.m * s.n, 0x7FC0);  // C starts as bf16 NaN
  std::vector<float> ar(a.size()), br(b.size()), c(ch.size());
  FromFloat(DnnType::kBF16, a.data(), ah.data(), a.size());
  FromFloat(DnnType::kBF16, b.data(), bh.data(), b.size());
  ToFloat(DnnType::kBF16, ah.data(), ar.data(), a.size());
  ToFloat(DnnType::kBF16, bh.data(), br.data(), b.size());
  DnnlMatMul mm(s);
  EXPECT_EQ(mm.blocks(), 2);
  mm.Run(ah.data(), bh.data(), ch.data());
  ToFloat(DnnType::kBF16, ch.data(), c.data(), ch.size());
  MatMulSpec sf = s;
  sf.type = DnnType::kF32;
  const auto ref = Reference(sf, ar, br, {});
  for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], ref[i], 1e-2 * (1 + std::abs(ref[i]))) << "element " << i;
  MatMulSpec batched = sf;
  batched.a_batch = batched.b_batch = {2};
  EXPECT_EQ(DnnlMatMul(batched).blocks(), 1);
  MatMulSpec small = sf;
  small.m = 64, small.k = 16, small.n = 16;  // 33 kFLOP
  EXPECT_EQ(DnnlMatMul(small).blocks(), 1);
  SetOmpThreads(saved);
}

// A converted half product too large to copy whole -- a weight gradient over many rows (large K), an input gradient
// of a classifier (large M) -- runs a tile at a time, C accumulating over K: every transposition, sizes that the tiles
// do not divide, alpha and accumulate, against the double reference on the rounded operands; its workspace stays
// under 1.5 MB where whole copies take 4.6 MB. (On a CPU with native half GEMMs nothing converts.)
TEST(MatMulKernel, ConvertedHalfLargeProductsRunInTiles) {
  for (int variant = 0; variant < 10; ++variant) {
    MatMulSpec s;
    if (variant < 5)
      s.m = 17, s.k = 7936 + 5, s.n = 128;
    else
      s.m = 7936 + 3, s.k = 17, s.n = 128;
    s.type = variant % 2 ? DnnType::kF16 : DnnType::kBF16;
    s.trans_a = variant & 1, s.trans_b = (variant >> 1) & 1;
    if (variant % 5 == 4) s.alpha = 0.5f, s.accumulate = true, s.trans_a = true;
    auto a = Rand(s.m * s.k, 11 + variant), b = Rand(s.k * s.n, 12 + variant), c0 = Rand(s.m * s.n, 13);
    std::vector<uint16_t> ah(a.size()), bh(b.size()), ch(c0.size());
    std::vector<float> ar(a.size()), br(b.size()), cr(c0.size()), c(c0.size());
    FromFloat(s.type, a.data(), ah.data(), a.size());
    FromFloat(s.type, b.data(), bh.data(), b.size());
    FromFloat(s.type, c0.data(), ch.data(), c0.size());
    ToFloat(s.type, ah.data(), ar.data(), a.size());
    ToFloat(s.type, bh.data(), br.data(), b.size());
    ToFloat(s.type, ch.data(), cr.data(), c0.size());
    DnnlMatMul mm(s);
    if (mm.impl_name().find("converted") == std::string::npos) GTEST_SKIP() << "native half GEMMs on this CPU";
    EXPECT_LT(mm.workspace_bytes(), size_t{3} << 19) << "variant " << variant;
    mm.Run(ah.data(), bh.data(), ch.data());
    ToFloat(s.type, ch.data(), c.data(), ch.size());
    MatMulSpec sf = s;
    sf.type = DnnType::kF32;
    const auto ref = Reference(sf, ar, br, cr);
    for (size_t i = 0; i < c.size(); ++i)
      ASSERT_NEAR(c[i], ref[i], 1e-2 * (1 + std::abs(ref[i]))) << "variant " << variant << " element " << i;
  }
}

// A GEMM that stays one call gets oneDNN's team of --threads only with enough work to pay for waking it: the
// creating thread's team size after construction is the one the primitive was made for.
TEST(MatMulKernel, SmallWholeGemmsRunOnOneThread) {
  const int saved = IntraOpThreads();
  SetOmpThreads(2);
  int small_team = -1, large_team = -1;
  std::thread builder([&] {
    MatMulSpec small;
    small.m = 50, small.k = 784, small.n = 128;  // 10 MFLOP, 50 rows: no row blocks
    DnnlMatMul a(small);
    EXPECT_EQ(a.blocks(), 1);
    small_team = omp_get_max_threads();
    MatMulSpec large;
    large.a_batch = large.b_batch = {2};  // batched: no row blocks; 2 x 67 MFLOP
    large.m = 256, large.k = 256, large.n = 512;
    DnnlMatMul b(large);
    EXPECT_EQ(b.blocks(), 1);
    large_team = omp_get_max_threads();
  });
  builder.join();
  SetOmpThreads(saved);
  EXPECT_EQ(small_team, 1);
  EXPECT_EQ(large_team, 2);
}

TEST(MatMulKernel, ZeroInnerDimGivesZeros) {
  MatMulSpec s;
  s.m = 3, s.k = 0, s.n = 2;
  std::vector<float> c(6, 7.f);
  DnnlMatMul(s).Run(nullptr, nullptr, c.data());
  for (float v : c) EXPECT_EQ(v, 0.f);
}

TEST(MatMulKernel, IntegerLoopsAreExact) {
  MatMulSpec s;
  s.a_batch = {2};
  s.b_batch = {1};
  s.m = 2, s.k = 3, s.n = 2;
  std::vector<int64_t> a{1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6}, b{1, 0, 0, 1, 2, 2}, c(8);
  NaiveMatMul<int64_t, int64_t>(s, a.data(), b.data(), c.data());
  EXPECT_EQ(c, (std::vector<int64_t>{7, 8, 16, 17, -7, -8, -16, -17}));
}

TEST(MatMulKernel, FillScaledBroadcastRowVector) {
  std::vector<float> c{1, 2, 3}, y(6);
  FillScaledBroadcast2D<float>(c.data(), 0, 1, 2.f, 2, 3, y.data());
  EXPECT_EQ(y, (std::vector<float>{2, 4, 6, 2, 4, 6}));
}

}  // namespace
}  // namespace ot::cpu
