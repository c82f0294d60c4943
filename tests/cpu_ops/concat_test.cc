// cpu::Concat / cpu::Split and cpu::Tile / cpu::Expand against index loops.
#include "cpu_ops/concat.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "cpu_ops/slice.h"
#include "cpu_ops/tile.h"

namespace ot::cpu {
namespace {

TEST(Concat, MiddleAxisThenSplitBack) {
  // a [2, 1, 3], b [2, 0, 3], c [2, 2, 3] along axis 1 -> [2, 3, 3]
  std::vector<int16_t> a(6), c(12), out(18);
  std::iota(a.begin(), a.end(), 100);
  std::iota(c.begin(), c.end(), 200);
  std::vector<int16_t> b;
  const std::vector<int64_t> rb{3 * 2, 0, 6 * 2};
  Concat({a.data(), b.data(), c.data()}, rb, out.data(), 2);
  for (int o = 0; o < 2; ++o)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) {
        int16_t want = j == 0 ? a[o * 3 + k] : c[(o * 2 + j - 1) * 3 + k];
        EXPECT_EQ(out[(o * 3 + j) * 3 + k], want);
      }
  std::vector<int16_t> a2(6), c2(12);
  Split(out.data(), {a2.data(), nullptr, c2.data()}, rb, 2);
  EXPECT_EQ(a2, a);
  EXPECT_EQ(c2, c);
}

TEST(Concat, LargeParallel) {
  const int64_t outer = 1000;
  std::vector<double> a(outer * 70), b(outer * 30), out(outer * 100);
  std::iota(a.begin(), a.end(), 0.0);
  std::iota(b.begin(), b.end(), -1e6);
  Concat({a.data(), b.data()}, {70 * 8, 30 * 8}, out.data(), outer);
  for (int64_t o = 0; o < outer; ++o) {
    ASSERT_EQ(out[o * 100 + 5], a[o * 70 + 5]);
    ASSERT_EQ(out[o * 100 + 70 + 29], b[o * 30 + 29]);
  }
}

TEST(Tile, RepeatsEachDim) {
  // in [2, 3], repeats [2, 3] -> [4, 9]
  std::vector<int32_t> in{1, 2, 3, 4, 5, 6}, out(36);
  Tile(in.data(), {2, 3}, {2, 3}, out.data(), 4);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 9; ++j) EXPECT_EQ(out[i * 9 + j], in[(i % 2) * 3 + j % 3]);
}

TEST(Expand, BroadcastBothWays) {
  // in [3, 1] to [2, 3, 4]
  std::vector<uint8_t> in{7, 8, 9}, out(24);
  Expand(in.data(), {3, 1}, out.data(), {2, 3, 4}, 1);
  for (int a = 0; a < 2; ++a)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) EXPECT_EQ(out[(a * 3 + i) * 4 + j], in[i]);
}

TEST(Slice, NegativeStepsAndOffsets) {
  // in [4, 5]; rows 3, 1 (start 3 step -2), cols 1..4 step 2 -> [2, 2]
  std::vector<float> in(20), out(4);
  std::iota(in.begin(), in.end(), 0.f);
  Slice(in.data(), out.data(), 4, {4, 5}, {3, 1}, {-2, 2}, {2, 2});
  EXPECT_EQ(out, (std::vector<float>{16, 18, 6, 8}));
}

}  // namespace
}  // namespace ot::cpu
