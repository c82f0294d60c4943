// graph/ops/optimizer_shard.h: how --shard-optimizer splits the parameters over the ranks.
#include "graph/ops/optimizer_shard.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "graph/error.h"

namespace ot {
namespace {

// Every element of every parameter belongs to exactly one rank, at a place of its own in that rank's state, and
// the runs of a group's block are the group's values [r * C, (r + 1) * C) in packing order.
TEST(OptimizerShards, EveryElementHasOneOwnerAndOnePlace) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 9), world = 1 + static_cast<int>(rng() % 5);
    std::vector<int64_t> numel(n);
    for (auto& e : numel) e = 1 + static_cast<int64_t>(rng() % 23);
    // Random groups: a random permutation cut at random places.
    std::vector<size_t> perm(n);
    for (int i = 0; i < n; ++i) perm[i] = static_cast<size_t>(i);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<std::vector<size_t>> groups(1);
    for (size_t i : perm) {
      if (!groups.back().empty() && rng() % 3 == 0) groups.emplace_back();
      groups.back().push_back(i);
    }
    const OptimizerShards s(world, OptimizerShards::Encode(groups), numel);
    int64_t expect_size = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
      int64_t len = 0;
      for (size_t i : groups[g]) len += numel[i];
      EXPECT_EQ(s.block(g), (len + world - 1) / world);
      EXPECT_EQ(s.block_at(g), expect_size);
      expect_size += s.block(g);
    }
    ASSERT_EQ(s.size(), expect_size);
    std::vector<std::vector<int>> owner(n);
    for (int i = 0; i < n; ++i) owner[i].assign(static_cast<size_t>(numel[i]), -1);
    for (int r = 0; r < world; ++r) {
      std::vector<char> used(static_cast<size_t>(s.size()), 0);
      for (const ShardSlice& sl : s.Slices(r)) {
        ASSERT_GT(sl.len, 0);
        ASSERT_GE(sl.at, s.block_at(sl.group));
        ASSERT_LE(sl.at + sl.len, s.block_at(sl.group) + s.block(sl.group));
        // Where the run sits in its group's packed values: block r, at the same distance from its start.
        int64_t start = 0;
        for (size_t i : groups[sl.group]) {
          if (static_cast<int>(i) == sl.param) break;
          start += numel[i];
        }
        EXPECT_EQ(start + sl.offset - r * s.block(sl.group), sl.at - s.block_at(sl.group));
        for (int64_t e = 0; e < sl.len; ++e) {
          int& o = owner[sl.param][static_cast<size_t>(sl.offset + e)];
          EXPECT_EQ(o, -1) << "element owned twice";
          o = r;
          EXPECT_EQ(used[static_cast<size_t>(sl.at + e)]++, 0) << "state place used twice";
        }
      }
    }
    for (int i = 0; i < n; ++i)
      for (int o : owner[i]) EXPECT_GE(o, 0) << "an element no rank owns";
  }
}

TEST(OptimizerShards, TwoRanksSplitAGroupInHalves) {
  // Parameters of 5 and 4 values in one group: 9 values, padded to 10, blocks of 5.
  const OptimizerShards s(2, OptimizerShards::Encode({{1, 0}}), {5, 4});
  EXPECT_EQ(s.size(), 5);
  const std::vector<ShardSlice> r0 = s.Slices(0), r1 = s.Slices(1);
  ASSERT_EQ(r0.size(), 2u);  // parameter 1's 4 values, then parameter 0's first
  EXPECT_EQ(r0[0].param, 1);
  EXPECT_EQ(r0[0].len, 4);
  EXPECT_EQ(r0[1].param, 0);
  EXPECT_EQ(r0[1].offset, 0);
  EXPECT_EQ(r0[1].len, 1);
  EXPECT_EQ(r0[1].at, 4);
  ASSERT_EQ(r1.size(), 1u);  // parameter 0's last 4, and the padding
  EXPECT_EQ(r1[0].param, 0);
  EXPECT_EQ(r1[0].offset, 1);
  EXPECT_EQ(r1[0].len, 4);
  EXPECT_EQ(r1[0].at, 0);
}

TEST(OptimizerShards, RefusesGroupsThatDoNotCoverTheParameters) {
  EXPECT_THROW(OptimizerShards(2, OptimizerShards::Encode({{0}}), {3, 4}), Error);          // 1 in no group
  EXPECT_THROW(OptimizerShards(2, OptimizerShards::Encode({{0, 1}, {1}}), {3, 4}), Error);  // 1 twice
  EXPECT_THROW(OptimizerShards(2, OptimizerShards::Encode({{0, 2}}), {3, 4}), Error);       // out of range
  EXPECT_THROW(OptimizerShards(2, {3, 0, 1}, {3, 4}), Error);                               // runs past the end
}

}  // namespace
}  // namespace ot
