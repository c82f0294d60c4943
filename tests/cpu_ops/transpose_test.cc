// cpu::Transpose and cpu::StridedCopy against index-by-index references, over element sizes and layouts that
// take each path (row copies, tiled 2-D transpose, parallel split).
#include "cpu_ops/transpose.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "cpu_ops/slice.h"

namespace ot::cpu {
namespace {

std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Reference: output element o (row-major over permuted dims) reads input at the matching index.
std::vector<uint8_t> NaiveTranspose(const std::vector<uint8_t>& in, size_t esz, const std::vector<int64_t>& dims,
                                    const std::vector<int64_t>& perm) {
  const int r = static_cast<int>(dims.size());
  std::vector<int64_t> od(r), is = ContiguousStrides(dims);
  for (int k = 0; k < r; ++k) od[k] = dims[perm[k]];
  const int64_t n = NumElementsOf(dims);
  std::vector<uint8_t> out(n * esz);
  for (int64_t o = 0; o < n; ++o) {
    int64_t rem = o, off = 0;
    for (int k = r - 1; k >= 0; --k) {
      off += (rem % od[k]) * is[perm[k]];
      rem /= od[k];
    }
    std::memcpy(&out[o * esz], &in[off * esz], esz);
  }
  return out;
}

void CheckTranspose(const std::vector<int64_t>& dims, const std::vector<int64_t>& perm, size_t esz) {
  const int64_t n = NumElementsOf(dims);
  std::vector<uint8_t> in = RandomBytes(n * esz, n * 31 + esz);
  std::vector<uint8_t> out(n * esz, 0xcd);
  Transpose(in.data(), out.data(), esz, dims, perm);
  ASSERT_EQ(out, NaiveTranspose(in, esz, dims, perm));
}

TEST(Transpose, AllPermutationsRank4AllElementSizes) {
  const std::vector<int64_t> dims{3, 1, 5, 4};
  for (size_t esz : {1, 2, 4, 8, 3}) {
    std::vector<int64_t> perm{0, 1, 2, 3};
    do {
      SCOPED_TRACE("esz " + std::to_string(esz) + " perm " + std::to_string(perm[0]) + std::to_string(perm[1]) +
                   std::to_string(perm[2]) + std::to_string(perm[3]));
      CheckTranspose(dims, perm, esz);
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST(Transpose, LargeTiledAndParallel) {
  CheckTranspose({300, 257}, {1, 0}, 4);       // tiles with ragged edges, parallel
  CheckTranspose({7, 65, 129}, {2, 1, 0}, 2);  // outer axis plus tiles
  CheckTranspose({4, 33, 5, 70}, {0, 3, 2, 1}, 8);
  CheckTranspose({64, 48, 40}, {0, 2, 1}, 1);
  CheckTranspose({20, 30, 200}, {1, 0, 2}, 4);  // innermost stays: row copies, parallel
}

// Rows of 16-128 bytes copied with a fixed size, in runs along the second-innermost axis (attention's head split,
// [b, T, h, d] -> [b, h, T, d]); the large ones are split into parallel chunks that end inside a run.
TEST(Transpose, ShortFixedSizeRows) {
  CheckTranspose({5, 7, 3, 16}, {0, 2, 1, 3}, 4);    // 64-byte rows, serial
  CheckTranspose({3, 9, 5, 8}, {2, 0, 1, 3}, 2);     // 16-byte rows
  CheckTranspose({4, 6, 2, 8}, {1, 2, 0, 3}, 4);     // 32-byte rows
  CheckTranspose({2, 5, 3, 16}, {2, 1, 0, 3}, 8);    // 128-byte rows
  CheckTranspose({33, 37, 4, 16}, {0, 2, 1, 3}, 4);  // 312 KB: parallel, 1024-row chunks cut the 37-row runs
  CheckTranspose({29, 31, 3, 8}, {1, 2, 0, 3}, 8);   // 64-byte rows of 8-byte elements, parallel
}

// Four-byte elements in 4x4 register blocks where a tile's sides are multiples of 4; ragged tiles copy element by
// element.
TEST(Transpose, FourByFourBlocks) {
  CheckTranspose({32, 64, 36}, {0, 2, 1}, 4);  // ragged tiles of 4: still blocks
  CheckTranspose({6, 32, 30}, {0, 2, 1}, 4);   // 30: element by element
  CheckTranspose({3, 40, 4, 24}, {0, 2, 3, 1}, 4);
  CheckTranspose({68, 44}, {1, 0}, 4);
}

// Batches of small matrices with one side of 2, 3, 4 or 8 (a compile-time loop): the channel shuffle of a
// channels-last activation ([N, H, W, g, C/g] -> [N, H, W, C/g, g]) and its gradient, both directions, every
// element size it takes, serial and parallel; other small sides take the tiled path.
TEST(Transpose, SmallSideBatches) {
  for (size_t esz : {2, 4, 8}) {
    SCOPED_TRACE("esz " + std::to_string(esz));
    CheckTranspose({2, 7, 7, 2, 58}, {0, 1, 2, 4, 3}, esz);
    CheckTranspose({2, 7, 7, 58, 2}, {0, 1, 2, 4, 3}, esz);
    CheckTranspose({4, 28, 28, 2, 58}, {0, 1, 2, 4, 3}, esz);  // parallel chunks of rows
    CheckTranspose({3, 5, 3, 40}, {0, 1, 3, 2}, esz);
    CheckTranspose({3, 5, 40, 4}, {0, 1, 3, 2}, esz);
    CheckTranspose({9, 8, 33}, {0, 2, 1}, esz);
    CheckTranspose({2, 300}, {1, 0}, esz);       // one matrix
    CheckTranspose({6, 5, 17}, {0, 2, 1}, esz);  // a side of 5: tiled
  }
  CheckTranspose({4, 28, 28, 2, 58}, {0, 1, 2, 4, 3}, 1);  // one-byte elements: tiled
}

TEST(Transpose, EmptyAndScalar) {
  std::vector<uint8_t> in{1, 2, 3, 4}, out(4, 0);
  Transpose(in.data(), out.data(), 4, {}, {});
  EXPECT_EQ(out, in);
  Transpose(in.data(), out.data(), 4, {0, 3}, {1, 0});  // nothing to write, must not crash
}

// StridedCopy with broadcast (stride 0) and reversed (negative) strides.
TEST(StridedCopy, BroadcastAndReverse) {
  std::vector<int32_t> in(12);
  std::iota(in.begin(), in.end(), 0);  // [3, 4]
  std::vector<int32_t> out(2 * 3 * 4);
  // out[a, i, j] = in[2 - i, 3 - j] for a in [0, 2)
  StridedCopy(in.data(), 11, out.data(), 4, {2, 3, 4}, {0, -4, -1});
  for (int a = 0; a < 2; ++a)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) EXPECT_EQ(out[(a * 3 + i) * 4 + j], (2 - i) * 4 + (3 - j));
}

// Contiguous 64-byte rows read in reverse order along the middle axis, a fixed-size row copy with a negative step.
TEST(StridedCopy, FixedRowsReversed) {
  std::vector<float> in(3 * 5 * 16);
  std::iota(in.begin(), in.end(), 0.f);  // [3, 5, 16]
  std::vector<float> out(in.size(), -1.f);
  StridedCopy(in.data(), 4 * 16, out.data(), 4, {3, 5, 16}, {80, -16, 1});
  for (int a = 0; a < 3; ++a)
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 16; ++j) ASSERT_EQ(out[(a * 5 + i) * 16 + j], in[a * 80 + (4 - i) * 16 + j]);
}

TEST(StridedCopy, LargeParallelMatchesSerialReference) {
  const std::vector<int64_t> dims{37, 41, 53};  // 80k elements of 8 bytes
  std::vector<uint64_t> in(NumElementsOf(dims) * 2);
  std::mt19937_64 rng(7);
  for (auto& v : in) v = rng();
  // Every other element along the last dim, middle dim reversed.
  std::vector<int64_t> od{37, 41, 26};
  std::vector<int64_t> st{41 * 53, -53, 2};
  int64_t base = 40 * 53 + 1;
  std::vector<uint64_t> out(NumElementsOf(od));
  StridedCopy(in.data(), base, out.data(), 8, od, st);
  for (int64_t a = 0; a < od[0]; ++a)
    for (int64_t b = 0; b < od[1]; ++b)
      for (int64_t c = 0; c < od[2]; ++c)
        ASSERT_EQ(out[(a * od[1] + b) * od[2] + c], in[base + a * st[0] + b * st[1] + c * st[2]]);
}

}  // namespace
}  // namespace ot::cpu
