// cpu::Gather / GatherElements / GatherND and the index checks, against loops over explicit indices.
#include "cpu_ops/gather.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cpu_ops/slice.h"

namespace ot::cpu {
namespace {

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(n);
  std::mt19937 rng(static_cast<unsigned>(n));
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto& x : v) x = u(rng);
  return v;
}

TEST(Gather, MiddleAxisNegativeIndices) {
  // data [2, 5, 3], indices [4] on axis 1 -> [2, 4, 3]
  std::vector<float> data = Iota(30);
  std::vector<int32_t> idx{4, -1, 0, -5};
  std::vector<float> out(24);
  ASSERT_EQ(FindBadIndex(idx.data(), 4, 5), -1);
  Gather(data.data(), idx.data(), 4, out.data(), 2, 5, 3 * sizeof(float));
  for (int a = 0; a < 2; ++a)
    for (int j = 0; j < 4; ++j)
      for (int c = 0; c < 3; ++c) {
        int i = idx[j] < 0 ? idx[j] + 5 : idx[j];
        EXPECT_EQ(out[(a * 4 + j) * 3 + c], data[(a * 5 + i) * 3 + c]);
      }
}

TEST(Gather, LargeParallel) {
  const int64_t outer = 300, D = 50, inner = 40, n = 33;
  std::vector<float> data = Iota(outer * D * inner);
  std::vector<int64_t> idx(n);
  std::mt19937 rng(3);
  for (auto& i : idx) i = static_cast<int64_t>(rng() % (2 * D)) - D;
  std::vector<float> out(outer * n * inner);
  Gather(data.data(), idx.data(), n, out.data(), outer, D, inner * sizeof(float));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j) {
      int64_t i = idx[j] < 0 ? idx[j] + D : idx[j];
      for (int64_t c = 0; c < inner; ++c) ASSERT_EQ(out[(o * n + j) * inner + c], data[(o * D + i) * inner + c]);
    }
}

TEST(Gather, BadIndexIsFound) {
  std::vector<int64_t> idx{0, 2, -3, 3};
  EXPECT_EQ(FindBadIndex(idx.data(), 4, 3), 3);
  std::vector<int64_t> idx2{0, -4};
  EXPECT_EQ(FindBadIndex(idx2.data(), 2, 3), 1);
  std::vector<int64_t> nd{0, 1, 1, 5};  // two tuples over dims [2, 3]
  EXPECT_EQ(FindBadIndexND(nd.data(), 2, {2, 3}), 3);
}

TEST(GatherElements, Axis1) {
  // data [3, 4], indices [3, 2] along axis 1
  std::vector<float> data = Iota(12);
  std::vector<int64_t> idx{3, 0, -1, 1, 2, -4};
  std::vector<float> out(6);
  GatherElements(data.data(), {3, 4}, idx.data(), {3, 2}, 1, out.data(), sizeof(float));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      int64_t k = idx[i * 2 + j] < 0 ? idx[i * 2 + j] + 4 : idx[i * 2 + j];
      EXPECT_EQ(out[i * 2 + j], data[i * 4 + k]);
    }
}

TEST(GatherND, BatchDims) {
  // data [2, 3, 4], indices [2, 2, 1] with batch_dims 1 -> out [2, 2, 4]
  std::vector<float> data = Iota(24);
  std::vector<int64_t> idx{2, 0, -1, 1};
  std::vector<float> out(16);
  GatherND(data.data(), {2, 3, 4}, idx.data(), {2, 2, 1}, 1, out.data(), sizeof(float));
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 2; ++t) {
      int64_t i = idx[b * 2 + t] < 0 ? idx[b * 2 + t] + 3 : idx[b * 2 + t];
      for (int c = 0; c < 4; ++c) EXPECT_EQ(out[(b * 2 + t) * 4 + c], data[(b * 3 + i) * 4 + c]);
    }
}

TEST(GatherND, FullTuples) {
  // data [2, 3], indices [3, 2] -> 3 scalars
  std::vector<float> data = Iota(6);
  std::vector<int64_t> idx{1, 2, 0, 0, -1, -3};
  std::vector<float> out(3);
  GatherND(data.data(), {2, 3}, idx.data(), {3, 2}, 0, out.data(), sizeof(float));
  EXPECT_EQ(out[0], data[5]);
  EXPECT_EQ(out[1], data[0]);
  EXPECT_EQ(out[2], data[3]);
}

}  // namespace
}  // namespace ot::cpu
