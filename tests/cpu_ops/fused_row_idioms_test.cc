// Row idioms (kernel_common/cluster_idioms.h) in the cluster interpreter (cpu_ops/fused_elementwise.cc): a softmax or
// softmax-backward program runs as one row routine (row_routines() == 1) and gives, bit for bit, what the
// interpreter computes instruction by instruction -- its twin, the same program with one of the idiom's inner values
// also an output, which stops the match (row_routines() == 0). Both are checked against float64 too. Inputs are
// fresh random draws with masked (-1e9), all -inf, +inf and NaN rows mixed in; outputs are pre-filled with NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu_ops/fused_elementwise.h"
#include "cpu_ops/softmax.h"
#include "kernel_common/cluster_idioms.h"
#include "kernel_common/cluster_program_text.h"
#include "kernel_common/half.h"

namespace ot::cpu {
namespace {

using cluster::DType;

std::mt19937& Gen() {
  static std::mt19937 g(std::random_device{}());
  return g;
}

bool SameBits(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0; }

// Runs program `text` over domain D with f32 inputs; returns output 0 (as floats; bf16 widened).
std::vector<float> RunProgram(const std::string& text, const std::vector<int64_t>& D,
                              const std::vector<std::vector<int64_t>>& dims, const std::vector<std::vector<float>>& ins,
                              DType out_type, int* routines) {
  const cluster::Program p = cluster::ParseProgram(text);
  FusedKernel k(p, D, dims, std::vector<DType>(ins.size(), DType::kF32), 2);
  *routines = k.row_routines();
  std::vector<char> ws(k.workspace_bytes() + 64);
  void* w = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) & ~uintptr_t{63});
  std::vector<const void*> in;
  for (const auto& v : ins) in.push_back(v.data());
  const int64_t n = k.numel();
  std::vector<float> out(n, NAN), extra(n, NAN);
  std::vector<bfloat16> out16(n, bfloat16(NAN));
  std::vector<void*> outs = {out_type == DType::kBF16 ? static_cast<void*>(out16.data()) : out.data(), extra.data()};
  k.Run(in.data(), outs.data(), w);
  if (out_type == DType::kBF16)
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(out16[i]);
  return out;
}

// Scores of rows of L: uniform, with a causal-style mask of -1e9 on some, and special rows.
std::vector<float> Scores(int64_t rows, int64_t L, bool specials) {
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  std::vector<float> x(rows * L);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < L; ++j) x[r * L + j] = (r % 3 == 0 && j > r % L) ? -1e9f : u(Gen());
  if (specials && rows >= 8) {
    for (int64_t j = 0; j < L; ++j) x[1 * L + j] = -INFINITY;  // all -inf: NaN row
    x[2 * L + L / 2] = NAN;
    x[4 * L] = INFINITY;
    x[5 * L + L - 1] = -INFINITY;  // one -inf: an exact 0
  }
  return x;
}

const char* DT(DType t) { return t == DType::kBF16 ? "bf16" : "f32"; }

TEST(RowIdioms, AttentionSoftmaxRunsAsOneRoutineWithTheInterpretersBits) {
  for (int64_t L : {32, 16, 64, 128, 20, 5, 300}) {
    for (DType t : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(::testing::Message() << "rows of " << L << ", " << DT(t));
      const int64_t rows = 9 + std::uniform_int_distribution<int>(0, 30)(Gen());
      const std::vector<int64_t> D = {rows, L};
      const std::string body = std::string("inputs 2\nreduce_axes 1\n%0 = input input=0 : f32\n") +
                               "%1 = input input=1 : f32\n%2 = div %0 %1 : f32\n%3 = reduce_max %2 : f32 row\n" +
                               "%4 = sub %2 %3 : f32\n%5 = exp %4 : f32\n%6 = reduce_sum %5 : f32 row\n" +
                               "%7 = reciprocal %6 : f32 row\n%8 = mul %5 %7 : " + DT(t) + "\n" +
                               "%9 = mul %8 %1 : f32\n";  // reads the idiom's result: its rounding shows
      const std::vector<std::vector<float>> ins = {Scores(rows, L, true), {4.f}};
      int r1 = -1, r2 = -1;
      const std::vector<float> got = RunProgram(body + "outputs %9\n", D, {D, {}}, ins, DType::kF32, &r1);
      const std::vector<float> want = RunProgram(body + "outputs %9 %5\n", D, {D, {}}, ins, DType::kF32, &r2);
      EXPECT_EQ(r1, 1);
      EXPECT_EQ(r2, 0);
      for (int64_t i = 0; i < rows * L; ++i)
        ASSERT_TRUE(SameBits(got[i], want[i])) << "element " << i << ": " << got[i] << " vs " << want[i];
      // float64, rows without special values.
      for (int64_t r = 0; r < rows; ++r) {
        if (r == 1 || r == 2 || r == 4 || r == 5) continue;
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < L; ++j) m = std::max(m, ins[0][r * L + j] / 4.0);
        for (int64_t j = 0; j < L; ++j) s += std::exp(ins[0][r * L + j] / 4.0 - m);
        for (int64_t j = 0; j < L; ++j) {
          const double e = 4 * std::exp(ins[0][r * L + j] / 4.0 - m) / s;
          ASSERT_NEAR(got[r * L + j], e, (t == DType::kBF16 ? 4e-3 : 2e-6) * e + 1e-9);
        }
      }
      EXPECT_EQ(got[5 * L + L - 1], 0.f);
      EXPECT_TRUE(std::isnan(got[1 * L])) << "an all -inf row is NaN";
    }
  }
}

TEST(RowIdioms, SoftmaxBackwardRunsAsOneRoutineWithTheInterpretersBits) {
  for (int64_t L : {32, 16, 20, 300, 3}) {
    for (DType t : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(::testing::Message() << "rows of " << L << ", " << DT(t));
      const int64_t rows = 9 + std::uniform_int_distribution<int>(0, 30)(Gen());
      const std::vector<int64_t> D = {rows, L};
      // dx = y (dy - sum(dy y)) / 4, the product written as y * dy (either order matches).
      const std::string body = std::string("inputs 3\nreduce_axes 1\n%0 = input input=0 : f32\n") +
                               "%1 = input input=1 : f32\n%2 = mul %1 %0 : f32\n%3 = reduce_sum %2 : f32 row\n" +
                               "%4 = sub %0 %3 : f32\n%5 = mul %4 %1 : " + DT(t) + "\n" +
                               "%6 = input input=2 : f32\n%7 = div %5 %6 : f32\n";
      std::vector<float> y(rows * L), dy(rows * L);
      std::uniform_real_distribution<float> u(-1.f, 1.f), p(0.f, 1.f);
      for (auto& v : y) v = p(Gen());
      for (auto& v : dy) v = u(Gen());
      dy[3 * L + L / 2] = NAN;
      const std::vector<std::vector<float>> ins = {dy, y, {4.f}};
      int r1 = -1, r2 = -1;
      const std::vector<float> got = RunProgram(body + "outputs %7\n", D, {D, D, {}}, ins, DType::kF32, &r1);
      const std::vector<float> want = RunProgram(body + "outputs %7 %4\n", D, {D, D, {}}, ins, DType::kF32, &r2);
      EXPECT_EQ(r1, 1);
      EXPECT_EQ(r2, 0);
      for (int64_t i = 0; i < rows * L; ++i)
        ASSERT_TRUE(SameBits(got[i], want[i])) << "element " << i << ": " << got[i] << " vs " << want[i];
      for (int64_t r = 0; r < rows; ++r) {
        if (r == 3) {
          EXPECT_TRUE(std::isnan(got[r * L])) << "a NaN dy makes its row NaN";
          continue;
        }
        double s = 0;
        for (int64_t j = 0; j < L; ++j) s += double(dy[r * L + j]) * y[r * L + j];
        for (int64_t j = 0; j < L; ++j) {
          const double e = y[r * L + j] * (dy[r * L + j] - s) / 4.0;
          ASSERT_NEAR(got[r * L + j], e, (t == DType::kBF16 ? 4e-3 : 1e-5) * std::fabs(e) + 1e-6);
        }
      }
    }
  }
}

// The matcher refuses what is not exactly the idiom.
TEST(RowIdioms, NoMatchWhenTheSequenceDiffers) {
  auto routines = [](const std::string& text) {
    const cluster::Program p = cluster::ParseProgram(text);
    const std::vector<int64_t> D = {8, 32};
    std::vector<std::vector<int64_t>> dims(p.num_inputs, D);
    return FusedKernel(p, D, dims, std::vector<DType>(p.num_inputs, DType::kF32), 1).row_routines();
  };
  const std::string head = "inputs 2\nreduce_axes 1\n%0 = input input=0 : f32\n%1 = input input=1 : f32\n";
  // The idiom itself, to show the cases below differ from it in one point only.
  EXPECT_EQ(routines(head + "%2 = reduce_max %0 : f32 row\n%3 = sub %0 %2 : f32\n%4 = exp %3 : f32\n"
                            "%5 = reduce_sum %4 : f32 row\n%6 = reciprocal %5 : f32 row\n%7 = mul %4 %6 : f32\n"
                            "outputs %7\n"),
            1);
  // The max of another value than the one the sub reads.
  EXPECT_EQ(routines(head + "%2 = reduce_max %1 : f32 row\n%3 = sub %0 %2 : f32\n%4 = exp %3 : f32\n"
                            "%5 = reduce_sum %4 : f32 row\n%6 = reciprocal %5 : f32 row\n%7 = mul %4 %6 : f32\n"
                            "outputs %7\n"),
            0);
  // A bf16 step inside (the routine computes in float throughout).
  EXPECT_EQ(routines(head + "%2 = reduce_max %0 : f32 row\n%3 = sub %0 %2 : f32\n%4 = exp %3 : bf16\n"
                            "%5 = reduce_sum %4 : f32 row\n%6 = reciprocal %5 : f32 row\n%7 = mul %4 %6 : f32\n"
                            "outputs %7\n"),
            0);
  // The reciprocal's value read again (a third use).
  EXPECT_EQ(routines(head + "%2 = reduce_max %0 : f32 row\n%3 = sub %0 %2 : f32\n%4 = exp %3 : f32\n"
                            "%5 = reduce_sum %4 : f32 row\n%6 = reciprocal %5 : f32 row\n%7 = mul %4 %6 : f32\n"
                            "%8 = add %7 %6 : f32\noutputs %8\n"),
            0);
  // SoftmaxGrad whose product is of dy and another value than the one scaling the result.
  EXPECT_EQ(routines("inputs 3\nreduce_axes 1\n%0 = input input=0 : f32\n%1 = input input=1 : f32\n"
                     "%2 = input input=2 : f32\n%3 = mul %0 %2 : f32\n%4 = reduce_sum %3 : f32 row\n"
                     "%5 = sub %0 %4 : f32\n%6 = mul %1 %5 : f32\noutputs %6\n"),
            0);
  EXPECT_EQ(routines("inputs 3\nreduce_axes 1\n%0 = input input=0 : f32\n%1 = input input=1 : f32\n"
                     "%2 = input input=2 : f32\n%3 = mul %0 %1 : f32\n%4 = reduce_sum %3 : f32 row\n"
                     "%5 = sub %0 %4 : f32\n%6 = mul %1 %5 : f32\noutputs %6\n"),
            1);
}

// Softmax's rows of a length known at compile time (16/32/64/128, four at a time) give the bits of one row at a
// time (the generic path), and every element is written.
TEST(RowIdioms, FixedRowLengthsGiveTheOneRowBits) {
  for (int64_t L : {16, 32, 64, 128, 33}) {
    SCOPED_TRACE(::testing::Message() << "rows of " << L);
    const int64_t rows = 9;
    const std::vector<float> x = Scores(rows, L, true);
    std::vector<float> all(rows * L, NAN), one(rows * L, NAN);
    Softmax<float>(SoftmaxKind::kSoftmax, rows, L, 1, x.data(), all.data());
    for (int64_t r = 0; r < rows; ++r) SoftmaxRowsF32(1, L, x.data() + r * L, one.data() + r * L);
    for (int64_t i = 0; i < rows * L; ++i)
      ASSERT_TRUE(SameBits(all[i], one[i])) << "element " << i << ": " << all[i] << " vs " << one[i];
    for (int64_t r = 6; r < rows; ++r) {
      double s = 0;
      for (int64_t j = 0; j < L; ++j) s += all[r * L + j];
      EXPECT_NEAR(s, 1.0, 1e-5) << "row " << r;
    }
  }
}

}  // namespace
}  // namespace ot::cpu
