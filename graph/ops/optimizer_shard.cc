#include "graph/ops/optimizer_shard.h"

#include <algorithm>

#include "graph/error.h"

namespace ot {

OptimizerShards::OptimizerShards(int world, const std::vector<int64_t>& shard_groups, const std::vector<int64_t>& numel)
    : world_(world), numel_(numel) {
  if (world < 1) throw Error("shard_world must be >= 1, got " + std::to_string(world));
  std::vector<char> seen(numel.size(), 0);
  for (size_t at = 0; at < shard_groups.size();) {
    const int64_t count = shard_groups[at++];
    if (count < 1 || at + static_cast<size_t>(count) > shard_groups.size())
      throw Error("shard_groups: a group of " + std::to_string(count) + " parameters runs past the attribute");
    std::vector<int> group;
    int64_t len = 0;
    for (int64_t j = 0; j < count; ++j) {
      const int64_t i = shard_groups[at++];
      if (i < 0 || i >= static_cast<int64_t>(numel.size()))
        throw Error("shard_groups: parameter index " + std::to_string(i) + " is out of range");
      if (seen[static_cast<size_t>(i)]++) throw Error("shard_groups: parameter " + std::to_string(i) + " twice");
      group.push_back(static_cast<int>(i));
      len += numel[static_cast<size_t>(i)];
    }
    const int64_t block = (len + world - 1) / world;
    groups_.push_back(std::move(group));
    blocks_.push_back(block);
    starts_.push_back(size_);
    size_ += block;
  }
  for (size_t i = 0; i < seen.size(); ++i)
    if (!seen[i]) throw Error("shard_groups: parameter " + std::to_string(i) + " is in no group");
}

std::vector<ShardSlice> OptimizerShards::Slices(int r) const {
  std::vector<ShardSlice> out;
  int64_t at = 0;  // the group's block in the rank's state
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int64_t lo = r * blocks_[g], hi = lo + blocks_[g];  // the block in the group's flat values
    int64_t start = 0;
    for (int p : groups_[g]) {
      const int64_t n = numel_[static_cast<size_t>(p)];
      const int64_t b = std::max(lo, start), e = std::min(hi, start + n);
      if (b < e) out.push_back({static_cast<int>(g), p, b - start, e - b, at + (b - lo)});
      start += n;
    }
    at += blocks_[g];
  }
  return out;
}

std::vector<int64_t> OptimizerShards::Encode(const std::vector<std::vector<size_t>>& groups) {
  std::vector<int64_t> r;
  for (const auto& g : groups) {
    r.push_back(static_cast<int64_t>(g.size()));
    for (size_t i : g) r.push_back(static_cast<int64_t>(i));
  }
  return r;
}

}  // namespace ot
