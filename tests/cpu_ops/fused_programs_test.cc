// cpu_ops/fused_elementwise on whole programs against the reference of tests/cpu_ops/fused_reference.h: row
// reductions (softmax and layer norm as programs, empty rows), half programs bit for bit, random programs, periodic
// inputs read in place, NaN through the row max and min, and threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/cpu_ops/fused_reference.h"

namespace ot::cpu {
namespace {

using namespace fused_test;  // NOLINT: the tests' reference
using cluster::DType;
using cluster::Instr;
using cluster::Op;
using cluster::Program;

// ---- row reductions ----

Program SoftmaxProgram(DType t, int reduce_axes) {
  Builder b(1, reduce_axes);
  const int x = b.In(0, t);
  const int m = b.Op_(Op::kReduceMax, t, x);
  const int e = b.Op_(Op::kExp, t, b.Op_(Op::kSub, t, x, m));
  const int s = b.Op_(Op::kReduceSum, t, e);
  b.Out({b.Op_(Op::kDiv, t, e, s), m, s});
  return b.p;
}

TEST(FusedKernel, SoftmaxAsAProgram) {
  for (auto [D, k] : {std::pair<std::vector<int64_t>, int>{{4, 7, 33}, 1},
                      {{2, 3, 5000}, 1},
                      {{50, 3}, 1},
                      {{6, 9, 11}, 2},
                      {{2, 2, 3, 3}, 3},
                      {{700, 1}, 1},
                      {{1000}, 1}}) {
    SCOPED_TRACE(::testing::Message() << "rows of " << D.back() << ", reduce_axes " << k);
    const Program p = SoftmaxProgram(DType::kF32, k);
    const Tensor x = RandomTensor(DType::kF32, D, -4, 4);
    Check(p, D, {x}, 1e-5, 1e-7);
    // And against softmax computed directly.
    const KernelRun run = RunKernel(p, D, {x});
    const int64_t R = run.values[1].size(), L = Numel(D) / R;
    for (int64_t r = 0; r < R; ++r) {
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < L; ++j) m = std::max(m, x.at(r * L + j));
      for (int64_t j = 0; j < L; ++j) s += std::exp(x.at(r * L + j) - m);
      double total = 0;
      for (int64_t j = 0; j < L; ++j) {
        const double want = std::exp(x.at(r * L + j) - m) / s;
        ASSERT_NEAR(run.values[0][r * L + j], want, 2e-6 * want + 1e-9);
        total += run.values[0][r * L + j];
      }
      ASSERT_NEAR(total, 1.0, 1e-5);
      ASSERT_EQ(run.values[1][r], m);
    }
  }
}

Program LayerNormProgram(DType t, float eps) {
  Builder b(3, 1);
  const int x = b.In(0, t), gamma = b.In(1, t), beta = b.In(2, t);
  const int mean = b.Op_(Op::kReduceMean, t, x);
  const int c = b.Op_(Op::kSub, t, x, mean);
  const int var = b.Op_(Op::kReduceMean, t, b.Op_(Op::kMul, t, c, c));
  const int rstd = b.Op_(Op::kReciprocal, t, b.Op_(Op::kSqrt, t, b.Op_(Op::kAdd, t, var, b.Const(eps, t, true))));
  const int y = b.Op_(Op::kAdd, t, b.Op_(Op::kMul, t, b.Op_(Op::kMul, t, c, rstd), gamma), beta);
  b.Out({y, mean, rstd});
  return b.p;
}

TEST(FusedKernel, LayerNormAsAProgram) {
  for (const std::vector<int64_t>& D : {std::vector<int64_t>{8, 16, 96}, {3, 4099}, {5, 1}}) {
    const int64_t H = D.back();
    const std::vector<Tensor> ins = {RandomTensor(DType::kF32, D, -3, 5), RandomTensor(DType::kF32, {H}),
                                     RandomTensor(DType::kF32, {H})};
    const Program p = LayerNormProgram(DType::kF32, 1e-5f);
    Check(p, D, ins, 1e-5, 1e-6);
    const KernelRun run = RunKernel(p, D, ins);
    for (int64_t r = 0; r < Numel(D) / H; ++r) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < H; ++j) mean += ins[0].at(r * H + j) / H;
      for (int64_t j = 0; j < H; ++j) var += (ins[0].at(r * H + j) - mean) * (ins[0].at(r * H + j) - mean) / H;
      for (int64_t j = 0; j < H; ++j) {
        const double want = (ins[0].at(r * H + j) - mean) / std::sqrt(var + 1e-5) * ins[1].at(j) + ins[2].at(j);
        ASSERT_NEAR(run.values[0][r * H + j], want, 1e-4 * std::fabs(want) + 1e-4);
      }
    }
  }
}

TEST(FusedKernel, EmptyRowsAndEmptyDomains) {
  Builder b(1, 1);
  const int x = b.In(0);
  b.Out({b.Op_(Op::kReduceSum, DType::kF32, x), b.Op_(Op::kReduceMean, DType::kF32, x),
         b.Op_(Op::kReduceMax, DType::kF32, x), b.Op_(Op::kReduceMin, DType::kF32, x),
         b.Op_(Op::kNeg, DType::kF32, x)});
  const KernelRun run = RunKernel(b.p, {3, 0}, {RandomTensor(DType::kF32, {3, 0})});
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(run.values[0][r], 0.0);
    EXPECT_TRUE(std::isnan(run.values[1][r]));
    EXPECT_EQ(run.values[2][r], -INFINITY);
    EXPECT_EQ(run.values[3][r], INFINITY);
  }
  EXPECT_TRUE(run.values[4].empty());
  const KernelRun none = RunKernel(b.p, {0, 5}, {RandomTensor(DType::kF32, {0, 5})});
  EXPECT_TRUE(none.values[0].empty());
  // A rank-0 domain: one element.
  Builder s(1);
  s.Out({s.Op_(Op::kExp, DType::kF32, s.In(0))});
  Check(s.p, {}, {RandomTensor(DType::kF32, {})});
}

// ---- half programs: bit for bit what the ops compute one by one ----

TEST(FusedKernel, HalfProgramsEqualRoundingAfterEveryOp) {
  for (DType t : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(cluster::DTypeName(t));
    const std::vector<int64_t> D = {6, 300};
    Check(SoftmaxProgram(t, 1), D, {RandomTensor(t, D, -6, 6)});
    Check(LayerNormProgram(t, 1e-3f), D, {RandomTensor(t, D, -3, 5), RandomTensor(t, {300}), RandomTensor(t, {300})});
    // The Gelu block of a transformer MLP and its backward, with a bias, in half with an f32 output.
    Builder b(3);
    const int x = b.Op_(Op::kAdd, t, b.In(0, t), b.In(1, t));
    const int g = b.Op_(Op::kGelu, t, x, -1, -1, 1.f);
    const int dx = b.Op_(Op::kGeluGrad, t, b.In(2, t), x);
    const int relu = b.Op_(Op::kReluGrad, t, dx, b.Op_(Op::kSigmoid, t, g));
    b.Out({g, dx, b.Op_(Op::kCast, DType::kF32, relu), b.Op_(Op::kLess, DType::kBool, g, dx)});
    Check(b.p, {4, 1111}, {RandomTensor(t, {4, 1111}, -4, 4), RandomTensor(t, {1111}), RandomTensor(t, {4, 1111})});
  }
}

// ---- random programs ----

Op RandomOp(bool allow_reduce) {
  static const Op kOps[] = {Op::kNeg,   Op::kAbs,        Op::kSign,       Op::kExp,          Op::kLog,
                            Op::kSqrt,  Op::kReciprocal, Op::kTanh,       Op::kSigmoid,      Op::kRelu,
                            Op::kErf,   Op::kFloor,      Op::kCeil,       Op::kNot,          Op::kLeakyRelu,
                            Op::kGelu,  Op::kIdentity,   Op::kCast,       Op::kAdd,          Op::kSub,
                            Op::kMul,   Op::kDiv,        Op::kPow,        Op::kMax,          Op::kMin,
                            Op::kLess,  Op::kLessEqual,  Op::kGreater,    Op::kGreaterEqual, Op::kEqual,
                            Op::kAnd,   Op::kOr,         Op::kXor,        Op::kReluGrad,     Op::kGeluGrad,
                            Op::kWhere, Op::kReduceSum,  Op::kReduceMean, Op::kReduceMax,    Op::kReduceMin,
                            Op::kAdd,   Op::kMul,        Op::kSub};
  const int n = static_cast<int>(sizeof(kOps) / sizeof(kOps[0]));
  for (;;) {
    const Op op = kOps[RandInt(0, n - 1)];
    if (allow_reduce || !cluster::IsReduction(op)) return op;
  }
}

// Dims of an input that broadcasts to `target` (each dim kept or 1, leading dims sometimes dropped or added).
std::vector<int64_t> RandomBroadcastDims(const std::vector<int64_t>& target) {
  std::vector<int64_t> d;
  const int64_t drop = RandInt(0, 3) == 0 ? RandInt(0, static_cast<int64_t>(target.size())) : 0;
  if (RandInt(0, 5) == 0) d.push_back(1);
  for (size_t i = drop; i < target.size(); ++i) d.push_back(RandInt(0, 2) == 0 ? 1 : target[i]);
  return d;
}

TEST(FusedKernel, RandomProgramsMatchTheReference) {
  // OT_FUSED_SEED=N replays the one program of a failure's "seed N".
  const char* replay = std::getenv("OT_FUSED_SEED");
  const int64_t kPrograms = replay ? 1 : 150;
  for (int64_t iter = 0; iter < kPrograms; ++iter) {
    const uint64_t seed = replay ? std::strtoull(replay, nullptr, 10) : std::random_device{}();
    Gen().seed(seed);
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const int rank = static_cast<int>(RandInt(0, 4));
    std::vector<int64_t> D(rank);
    for (auto& d : D) d = RandInt(1, 7);
    if (rank > 0 && RandInt(0, 2) == 0) D[RandInt(0, rank - 1)] = RandInt(100, 700);  // several tiles
    const int K = rank > 0 && RandInt(0, 1) ? static_cast<int>(RandInt(1, rank)) : 0;
    std::vector<int64_t> row_shape = D, row_target(D.begin(), D.end() - K);
    for (int d = rank - K; d < rank; ++d) row_shape[d] = 1;
    const int num_inputs = static_cast<int>(RandInt(1, 4));
    Builder b(num_inputs, K);
    std::vector<Tensor> ins;
    const DType kTypes[] = {DType::kF32, DType::kF32, DType::kF16, DType::kBF16, DType::kBool};
    for (int k = 0; k < num_inputs; ++k) {
      const bool row = K > 0 && RandInt(0, 2) == 0;
      std::vector<int64_t> dims = RandomBroadcastDims(row ? row_shape : D);
      const DType t = kTypes[RandInt(0, 4)];
      ins.push_back(RandomTensor(t, dims, -3, 3, RandInt(0, 3) == 0 ? 0.5 : 0));
      b.In(k, RandInt(0, 4) == 0 ? kTypes[RandInt(0, 3)] : t, row);
    }
    const int64_t len = RandInt(5, 30);
    while (static_cast<int64_t>(b.p.code.size()) < num_inputs + len) {
      const int n = static_cast<int>(b.p.code.size());
      if (RandInt(0, 9) == 0) {
        b.Const(static_cast<float>(Uniform(-2, 2)), kTypes[RandInt(0, 3)], K > 0 && RandInt(0, 1));
        continue;
      }
      const Op op = RandomOp(K > 0);
      int ops[3] = {-1, -1, -1};
      for (int k = 0; k < cluster::Arity(op); ++k) ops[k] = static_cast<int>(RandInt(std::max(0, n - 8), n - 1));
      if (cluster::IsReduction(op) && b.Row(ops[0])) continue;  // reduces full values only
      const bool boolean = (op >= Op::kLess && op <= Op::kXor) || op == Op::kNot;
      const DType t = boolean ? DType::kBool : kTypes[RandInt(0, 3)];
      float imm = 0.f;
      if (op == Op::kLeakyRelu) imm = static_cast<float>(Uniform(0, 0.5));
      if (op == Op::kGelu || op == Op::kGeluGrad) imm = static_cast<float>(RandInt(0, 1));
      b.Op_(op, t, ops[0], ops[1], ops[2], imm);
    }
    std::vector<int32_t> outs = {static_cast<int32_t>(b.p.code.size()) - 1};
    for (int64_t k = RandInt(0, 2); k > 0; --k) outs.push_back(static_cast<int32_t>(RandInt(0, b.p.code.size() - 1)));
    b.Out(outs);
    ASSERT_NO_THROW(cluster::Validate(b.p));
    // The text form round-trips every random program too.
    ASSERT_EQ(cluster::ToText(cluster::ParseProgram(cluster::ToText(b.p))), cluster::ToText(b.p));
    Check(b.p, D, ins, 0, 0, static_cast<int>(RandInt(1, 4)));
    if (::testing::Test::HasFailure()) break;
  }
}

// Inputs repeated with a period (the attention's [T, T] mask over [B, H, T, T]) are read in place when the tiles
// fit a period -- the tiles shrink to it -- and loaded otherwise; with and without rows, the results are the
// reference's exactly.
TEST(FusedKernel, PeriodicInputsMatchTheReference) {
  struct Case {
    std::vector<int64_t> D, period;
    int reduce_axes;
    int64_t tile;  // the expected tile: one period where it divides the default tile
  };
  for (const Case& c : {Case{{6, 4, 32, 32}, {32, 32}, 0, 1024}, Case{{5, 3, 16, 64}, {16, 64}, 1, 1024},
                        Case{{3, 4, 32, 32}, {32, 32}, 1, 1024}, Case{{9, 20, 20}, {20, 20}, 1, 2040},
                        Case{{3, 7, 300}, {7, 300}, 0, 2048}}) {
    SCOPED_TRACE(::testing::Message() << "period " << Numel(c.period) << ", reduce_axes " << c.reduce_axes);
    Builder b(2, c.reduce_axes);
    const int x = b.In(0), m = b.In(1);
    int y = b.Op_(Op::kAdd, DType::kF32, b.Op_(Op::kMul, DType::kF32, x, b.Const(0.5f, DType::kF32)), m);
    if (c.reduce_axes > 0) y = b.Op_(Op::kSub, DType::kF32, y, b.Op_(Op::kReduceMax, DType::kF32, y));
    b.Out({y});
    const std::vector<Tensor> ins = {RandomTensor(DType::kF32, c.D, -3, 3), RandomTensor(DType::kF32, c.period, -3, 3)};
    FusedKernel k(b.p, c.D, {c.D, c.period}, {DType::kF32, DType::kF32}, 2);
    EXPECT_EQ(k.tile_elements(), c.tile);
    Check(b.p, c.D, ins);
  }
}

// ReduceMax/ReduceMin over eight lanes: a NaN anywhere in a row (any lane, the tail) makes the row's result NaN; a
// row of +-inf and finite values gives the exact extreme.
TEST(FusedKernel, RowMaxAndMinPropagateNaNFromAnyLane) {
  for (int64_t len : {1, 7, 8, 9, 16, 31, 45}) {
    for (Op op : {Op::kReduceMax, Op::kReduceMin}) {
      Builder b(1, 1);
      b.Out({b.Op_(op, DType::kF32, b.In(0))});
      const int64_t rows = len + 2;  // row r < len has a NaN at r; row len has infinities; the last none
      Tensor x = RandomTensor(DType::kF32, {rows, len}, -5, 5);
      for (int64_t r = 0; r < len; ++r) WriteElem(DType::kF32, x.bytes, r * len + r, NAN);
      WriteElem(DType::kF32, x.bytes, len * len + len / 2, INFINITY);
      WriteElem(DType::kF32, x.bytes, len * len, -INFINITY);
      const KernelRun run = RunKernel(b.p, {rows, len}, {x});
      for (int64_t r = 0; r < len; ++r) EXPECT_TRUE(std::isnan(run.values[0][r])) << "len " << len << " row " << r;
      for (int64_t r = len; r < rows; ++r) {
        double want = op == Op::kReduceMax ? -INFINITY : INFINITY;
        for (int64_t j = 0; j < len; ++j)
          want = op == Op::kReduceMax ? std::max(want, x.at(r * len + j)) : std::min(want, x.at(r * len + j));
        EXPECT_EQ(run.values[0][r], want) << "len " << len << " row " << r;
      }
    }
  }
}

// An output stored over an input of the same size (the memory planner's in place): the last instruction writes
// straight into the output unless it reads that input itself; either way the result is that of separate buffers.
TEST(FusedKernel, InPlaceOutputsEqualSeparateOnes) {
  const std::vector<int64_t> D = {7, 1000};
  for (bool last_reads_x : {false, true}) {
    Builder b(1);
    const int x = b.In(0);
    const int e = b.Op_(Op::kExp, DType::kF32, b.Op_(Op::kMul, DType::kF32, x, b.Const(0.25f, DType::kF32)));
    b.Out({last_reads_x ? b.Op_(Op::kSub, DType::kF32, e, x)
                        : b.Op_(Op::kMul, DType::kF32, e, b.Const(3.f, DType::kF32))});
    const Tensor in = RandomTensor(DType::kF32, D, -3, 3);
    const KernelRun want = RunKernel(b.p, D, {in});
    FusedKernel k(b.p, D, {D}, {DType::kF32}, 2);
    std::vector<float> buf(Numel(D));
    std::memcpy(buf.data(), in.bytes.data(), in.bytes.size());
    std::vector<float> ws(k.workspace_bytes() / 4 + 16);
    float* ws64 = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) & ~uintptr_t{63});
    const void* ip[] = {buf.data()};
    void* op[] = {buf.data()};
    k.Run(ip, op, ws64);
    for (int64_t i = 0; i < Numel(D); ++i)
      ASSERT_EQ(buf[i], want.values[0][i]) << (last_reads_x ? "reads x" : "does not read x") << ", element " << i;
  }
}

// ---- threads ----

TEST(FusedKernel, OneTwoAndMoreThreadsGiveTheSameBits) {
  const std::vector<int64_t> D = {97, 1003};
  const Program soft = SoftmaxProgram(DType::kF32, 1);
  const std::vector<Tensor> ins = {RandomTensor(DType::kF32, D, -5, 5)};
  Builder b(2);
  const int x = b.In(0), y = b.In(1);
  b.Out({b.Op_(Op::kGelu, DType::kBF16, b.Op_(Op::kMul, DType::kF32, x, y))});
  const std::vector<Tensor> ins2 = {RandomTensor(DType::kF32, D), RandomTensor(DType::kF32, {1003})};
  for (const auto& [p, in] : {std::pair{soft, ins}, std::pair{b.p, ins2}}) {
    const KernelRun one = RunKernel(p, D, in, 1);
    for (int threads : {2, 3, 8}) {
      const KernelRun many = RunKernel(p, D, in, threads);
      for (size_t j = 0; j < one.outputs.size(); ++j)
        EXPECT_EQ(std::memcmp(one.outputs[j].bytes.data(), many.outputs[j].bytes.data(), one.outputs[j].bytes.size()),
                  0)
            << threads << " threads, output " << j;
    }
  }
}

TEST(FusedKernel, WorkspaceAndTiles) {
  const Program soft = SoftmaxProgram(DType::kF32, 1);
  FusedKernel small(soft, {8, 100}, {{8, 100}}, {DType::kF32}, 3);
  EXPECT_EQ(small.tile_elements(), 2000);  // 20 whole rows
  EXPECT_EQ(small.num_tiles(), 1);
  EXPECT_EQ(small.workspace_bytes() % 64, 0u);
  FusedKernel long_rows(soft, {3, 10000}, {{3, 10000}}, {DType::kF32}, 1);
  EXPECT_EQ(long_rows.tile_elements(), 10000);  // one row per tile
  EXPECT_EQ(long_rows.num_tiles(), 3);
  EXPECT_GE(long_rows.workspace_bytes(), 2 * 10000 * sizeof(float));
  // No more slots than tiles: one tile needs one slot whatever max_threads, and runs in any thread (even one
  // outside every arena).
  FusedKernel one(soft, {2, 10}, {{2, 10}}, {DType::kF32}, 8);
  FusedKernel one_thread(soft, {2, 10}, {{2, 10}}, {DType::kF32}, 1);
  EXPECT_EQ(one.workspace_bytes(), one_thread.workspace_bytes());
  EXPECT_EQ(long_rows.workspace_bytes(),
            FusedKernel(soft, {3, 10000}, {{3, 10000}}, {DType::kF32}, 8).workspace_bytes() / 3);
  const std::vector<Tensor> in = {RandomTensor(DType::kF32, {2, 10})};
  std::vector<float> out0(20, NAN), out1(2, NAN), out2(2, NAN);
  const void* ip[] = {in[0].bytes.data()};
  void* op[] = {out0.data(), out1.data(), out2.data()};
  std::vector<float> ws(one.workspace_bytes() / 4 + 16);
  float* ws64 = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) & ~uintptr_t{63});
  std::thread t([&] { one.Run(ip, op, ws64); });
  t.join();
  const KernelRun want = RunKernel(soft, {2, 10}, in);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(out0[i], want.values[0][i]) << i;
  // More tiles than max_threads, called from a wider arena (and from no arena): the thread slots still fit.
  const std::vector<Tensor> big = {RandomTensor(DType::kF32, {3, 10000})};
  const KernelRun big_want = RunKernel(soft, {3, 10000}, big, 1);
  std::vector<float> b0(30000, NAN), b1(3, NAN), b2(3, NAN);
  const void* bip[] = {big[0].bytes.data()};
  void* bop[] = {b0.data(), b1.data(), b2.data()};
  std::vector<float> bws(long_rows.workspace_bytes() / 4 + 16);
  float* bws64 = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(bws.data()) + 63) & ~uintptr_t{63});
  for (int round = 0; round < 2; ++round) {
    std::fill(b0.begin(), b0.end(), NAN);
    if (round == 0) {
      tbb::task_arena wide(4);
      wide.execute([&] { tbb::parallel_for(0, 1, [&](int) { long_rows.Run(bip, bop, bws64); }); });
    } else {
      std::thread th([&] { long_rows.Run(bip, bop, bws64); });
      th.join();
    }
    for (int i = 0; i < 30000; ++i) ASSERT_EQ(b0[i], big_want.values[0][i]) << "round " << round << " element " << i;
  }
}

}  // namespace
}  // namespace ot::cpu
