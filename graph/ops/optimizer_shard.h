// --shard-optimizer (ZeRO stage 1): which part of the optimizer's work each rank does. One definition, shared by the
// optimizer pass (the states' size), the update kernels (what a rank updates), the gradient reduce-scatter (which
// block a rank receives) and the checkpoint (gathering and scattering the states).
//
// The parameters are split into groups (data-parallel's gradient buckets, in their packing order); a group's
// parameters, flattened one after another, are L values, padded to P = ceil(L / W) * W and cut into W blocks of
// C = P / W: rank r owns block r of every group. A rank's optimizer state is its blocks, group after group: S values
// per state (the sum of the groups' C), the same S on every rank. Attributes of the OptimizerUpdate node:
// shard_world = W (absent or 1: unsharded) and shard_groups = for each group its parameter count, then the
// parameters' indices.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ot {

// One run of a parameter that a rank owns: `len` values from element `offset` of parameter `param`, at `at` in the
// rank's state.
struct ShardSlice {
  int group = 0;
  int param = 0;
  int64_t offset = 0, len = 0, at = 0;
};

class OptimizerShards {
 public:
  OptimizerShards() = default;
  // `numel[i]`: parameter i's element count. Throws Error when a group names a parameter twice, none or one out of
  // range, or some parameter is in no group.
  OptimizerShards(int world, const std::vector<int64_t>& shard_groups, const std::vector<int64_t>& numel);
  int world() const { return world_; }
  // Values per state on every rank.
  int64_t size() const { return size_; }
  // The runs rank `r` owns, group by group, in packing order.
  std::vector<ShardSlice> Slices(int r) const;
  // Group g's parameters in packing order, and its block size C.
  const std::vector<std::vector<int>>& groups() const { return groups_; }
  int64_t block(size_t g) const { return blocks_[g]; }
  // Where group g's block starts in a rank's state.
  int64_t block_at(size_t g) const { return starts_[g]; }

  // The attribute shard_groups for these groups.
  static std::vector<int64_t> Encode(const std::vector<std::vector<size_t>>& groups);

 private:
  int world_ = 1;
  int64_t size_ = 0;
  std::vector<std::vector<int>> groups_;
  std::vector<int64_t> blocks_, starts_;
  std::vector<int64_t> numel_;
};

}  // namespace ot
