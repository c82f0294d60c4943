// DataLoader: DESIGN.md's batch order (file order without shuffling, remainder dropped), a seeded permutation
// with shuffling that differs per epoch and repeats per seed, prefetch equal to Get, and data errors.
#include "training/data_loader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "executor/threads.h"
#include "graph/error.h"

namespace ot {
namespace {

std::map<std::string, Tensor> Arrays(int64_t n) {
  Tensor x(DataType::kFloat32, {n, 2});
  Tensor y(DataType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) {
    x.data<float>()[2 * i] = static_cast<float>(i);
    x.data<float>()[2 * i + 1] = static_cast<float>(-i);
    y.data<int64_t>()[i] = i;
  }
  return {{"x", x}, {"y", y}};
}

TEST(DataLoader, NoShuffleTakesSamplesInFileOrderAndDropsTheRemainder) {
  DataLoader d(Arrays(23), 5, false, 0, "t.npz");
  EXPECT_EQ(d.batches_per_epoch(), 4);
  Batch b = d.Get(3, 2);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(b.arrays["y"].data<int64_t>()[i], 10 + i);
    EXPECT_EQ(b.arrays["x"].data<float>()[2 * i + 1], -(10.0f + i));
  }
  EXPECT_THROW(d.Get(0, 4), Error);
}

TEST(DataLoader, ShuffleIsASeededPermutationPerEpoch) {
  DataLoader a(Arrays(20), 4, true, 7, "t.npz"), b(Arrays(20), 4, true, 7, "t.npz"), c(Arrays(20), 4, true, 8, "t.npz");
  auto epoch = [](DataLoader& d, int64_t e) {
    std::vector<int64_t> ids;
    for (int64_t k = 0; k < d.batches_per_epoch(); ++k) {
      Batch bt = d.Get(e, k);
      for (int i = 0; i < 4; ++i) {
        int64_t id = bt.arrays["y"].data<int64_t>()[i];
        EXPECT_EQ(bt.arrays["x"].data<float>()[2 * i], static_cast<float>(id)) << "rows stay together";
        ids.push_back(id);
      }
    }
    return ids;
  };
  std::vector<int64_t> e0 = epoch(a, 0);
  EXPECT_EQ(std::set<int64_t>(e0.begin(), e0.end()).size(), 20u) << "a permutation";
  EXPECT_EQ(e0, epoch(b, 0)) << "same seed, same order";
  EXPECT_NE(e0, epoch(a, 1)) << "another epoch, another order";
  EXPECT_NE(e0, epoch(c, 0)) << "another seed, another order";
}

// Data-parallel (DDP's rule): rank r of N takes the r-th slice of B of the global batch N x B, so the ranks' batches
// of step k together are what one process takes at step k with batch N x B -- in file order and shuffled alike.
TEST(DataLoader, RanksSplitTheGlobalBatchInRankOrder) {
  for (bool shuffle : {false, true}) {
    DataLoader one(Arrays(29), 6, shuffle, 5, "t.npz");
    DataLoader r0(Arrays(29), 2, shuffle, 5, "t.npz", 3, 0), r1(Arrays(29), 2, shuffle, 5, "t.npz", 3, 1),
        r2(Arrays(29), 2, shuffle, 5, "t.npz", 3, 2);
    EXPECT_EQ(r1.batches_per_epoch(), 4);  // 29 samples / (3 ranks x 2)
    for (int64_t e = 0; e < 2; ++e)
      for (int64_t k = 0; k < 4; ++k) {
        const Batch all = one.Get(e, k);
        const Batch parts[3] = {r0.Get(e, k), r1.Get(e, k), r2.Get(e, k)};
        for (int r = 0; r < 3; ++r)
          for (int i = 0; i < 2; ++i)
            EXPECT_EQ(parts[r].arrays.at("y").data<int64_t>()[i], all.arrays.at("y").data<int64_t>()[2 * r + i])
                << "shuffle " << shuffle << " epoch " << e << " step " << k << " rank " << r;
      }
  }
  EXPECT_THROW(DataLoader(Arrays(5), 2, false, 0, "t.npz", 3, 0), Error);  // not one global batch of 6
  EXPECT_THROW(DataLoader(Arrays(9), 2, false, 0, "t.npz", 3, 3), Error);  // no rank 3 of 3
}

TEST(DataLoader, PrefetchEqualsGet) {
  DataLoader d(Arrays(12), 3, true, 1, "t.npz");
  d.Prefetch(2, 1);
  Batch p = d.Take();
  Batch g = d.Get(2, 1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p.arrays["y"].data<int64_t>()[i], g.arrays["y"].data<int64_t>()[i]);
}

TEST(DataLoader, PrefetchCompletesWithOneThread) {
  // --threads 1: TBB may use this thread only, so Take must run the prefetch itself (it used to wait forever).
  SetThreadCount(1);
  DataLoader d(Arrays(10), 3, true, 4, "d.npz");
  for (int64_t i = 0; i < 3; ++i) {
    d.Prefetch(0, i);
    Batch b = d.Take();
    EXPECT_EQ(b.index, i);
    EXPECT_EQ(b.arrays.at("y").dims()[0], 3);
  }
  SetThreadCount(0);
}

TEST(DataLoader, DataErrorsNameFileArrayAndSample) {
  auto a = Arrays(6);
  a["x"].data<float>()[7] = std::nanf("");
  try {
    DataLoader d(a, 2, false, 0, "bad.npz");
    FAIL() << "NaN accepted";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("bad.npz"), std::string::npos) << m;
    EXPECT_NE(m.find("'x'"), std::string::npos) << m;
    EXPECT_NE(m.find("sample 3"), std::string::npos) << m;
  }
  auto b = Arrays(6);
  b["y"] = Tensor(DataType::kInt64, {5});
  EXPECT_THROW(DataLoader(b, 2, false, 0, "t.npz"), Error);
  EXPECT_THROW(DataLoader(Arrays(3), 4, false, 0, "t.npz"), Error);
}

}  // namespace
}  // namespace ot
