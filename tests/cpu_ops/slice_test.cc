// cpu::SliceBackward (the gradient of Slice) against a reference that walks the forward slice element by element:
// every output byte is checked (the output is filled with a sentinel first), for random geometries with negative
// and large steps, every element size, empty slices, and sizes that take the parallel paths.
#include "cpu_ops/slice.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace ot::cpu {
namespace {

struct Geometry {
  std::vector<int64_t> x, y, starts, steps;  // X's dims, the slice's dims, first index and step per axis
};

// A random slice of a random X: per axis a start in range, a step in [-3, 3] \ {0} and a count that stays inside.
Geometry RandomGeometry(std::mt19937_64& rng, int rank, int64_t max_dim) {
  Geometry g;
  for (int k = 0; k < rank; ++k) {
    const int64_t d = std::uniform_int_distribution<int64_t>(1, max_dim)(rng);
    int64_t step = std::uniform_int_distribution<int64_t>(1, 3)(rng);
    if (rng() % 2) step = -step;
    const int64_t start = std::uniform_int_distribution<int64_t>(0, d - 1)(rng);
    const int64_t room = step > 0 ? (d - 1 - start) / step + 1 : start / -step + 1;
    const int64_t count = std::uniform_int_distribution<int64_t>(rng() % 5 == 0 ? 0 : 1, room)(rng);
    g.x.push_back(d);
    g.y.push_back(count);
    g.starts.push_back(start);
    g.steps.push_back(step);
  }
  return g;
}

// out[x index of y element i] = in[i], zeros elsewhere, byte by byte.
std::vector<uint8_t> Reference(const Geometry& g, const std::vector<uint8_t>& in, size_t esz) {
  const std::vector<int64_t> xs = ContiguousStrides(g.x);
  std::vector<uint8_t> out(static_cast<size_t>(NumElementsOf(g.x)) * esz, 0);
  const int64_t n = NumElementsOf(g.y);
  const int rank = static_cast<int>(g.y.size());
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, off = 0;
    for (int k = rank - 1; k >= 0; --k) {
      const int64_t idx = rem % g.y[k];
      rem /= g.y[k];
      off += (g.starts[k] + idx * g.steps[k]) * xs[k];
    }
    std::memcpy(&out[static_cast<size_t>(off) * esz], &in[static_cast<size_t>(i) * esz], esz);
  }
  return out;
}

void Check(const Geometry& g, size_t esz, std::mt19937_64& rng) {
  std::vector<uint8_t> in(static_cast<size_t>(NumElementsOf(g.y)) * esz);
  for (uint8_t& b : in) b = static_cast<uint8_t>(rng() | 1);  // never zero: a missed element shows
  std::vector<uint8_t> out(static_cast<size_t>(NumElementsOf(g.x)) * esz, 0xAB);
  SliceBackward(in.data(), out.data(), esz, g.y, g.starts, g.steps, g.x);
  ASSERT_EQ(out, Reference(g, in, esz)) << "rank " << g.x.size() << " esz " << esz;
}

TEST(SliceBackward, RandomGeometriesEveryElementSize) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial)
    for (size_t esz : {1, 2, 3, 4, 8}) Check(RandomGeometry(rng, 1 + trial % 5, 7), esz, rng);
}

TEST(SliceBackward, FullSliceCopiesAndReversedFullSliceReverses) {
  std::mt19937_64 rng(8);
  Check({{3, 5}, {3, 5}, {0, 0}, {1, 1}}, 4, rng);
  Check({{3, 5}, {3, 5}, {0, 4}, {1, -1}}, 4, rng);  // as many elements as X, in another order
  Check({{4}, {0}, {0}, {1}}, 8, rng);               // nothing taken: all zeros
  Check({{}, {}, {}, {}}, 4, rng);                   // a scalar
}

// Large enough for the parallel zeroing and the parallel rows.
TEST(SliceBackward, LargeParallel) {
  std::mt19937_64 rng(9);
  Check({{64, 300, 40}, {64, 100, 40}, {0, 7, 0}, {1, 2, 1}}, 4, rng);  // a positional table's rows
  Check({{256, 1024}, {128, 1024}, {255, 0}, {-2, 1}}, 2, rng);
  Check({{2, 512, 513}, {2, 256, 171}, {0, 1, 512}, {1, 2, -3}}, 8, rng);  // strided innermost
}

}  // namespace
}  // namespace ot::cpu
