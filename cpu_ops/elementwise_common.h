// Shared machinery of the elementwise kernels: a fixed, deterministic parallel split of a flat range, and
// broadcast plans that walk an output in contiguous runs of its innermost dim. No IR types.
//
// Every output element is written by exactly one chunk: chunks are [c*kElementwiseGrain, (c+1)*kElementwiseGrain)
// whatever the thread count, so results never depend on scheduling.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

#include "kernel_common/half.h"

namespace ot::cpu {

constexpr int64_t kElementwiseGrain = 16384;

// Calls f(begin, end) for the chunks of [0, n) (each kElementwiseGrain long but the last), in parallel with
// TBB when there is more than one chunk.
void ParallelChunks(int64_t n, const std::function<void(int64_t, int64_t)>& f);

// Operands broadcast (numpy rules, right-aligned) into an output shape, with dims coalesced so runs are long.
struct BroadcastPlan {
  std::vector<int64_t> dims;                  // coalesced output dims, rank >= 1
  std::vector<std::vector<int64_t>> strides;  // per operand, element strides per coalesced dim (0: broadcast)
  int64_t numel = 0;
  int num_operands() const { return static_cast<int>(strides.size()); }
  // True when every operand has the output's shape (a flat loop suffices).
  bool all_contiguous = false;
};

// Throws std::invalid_argument when an operand does not broadcast to out_dims.
BroadcastPlan MakeBroadcastPlan(const std::vector<int64_t>& out_dims, const std::vector<std::vector<int64_t>>& in_dims);

// Calls run(out_offset, len, offsets, inner_strides) for the contiguous runs (along the innermost coalesced dim)
// of output elements [begin, end): output elements out_offset .. out_offset+len-1 read operand k at
// offsets[k] + j * inner_strides[k].
template <typename F>
void RunsInRange(const BroadcastPlan& p, int64_t begin, int64_t end, F& run) {
  const int rank = static_cast<int>(p.dims.size());
  const int nops = p.num_operands();
  std::vector<int64_t> idx(rank, 0), off(nops, 0), inner(nops, 0);
  int64_t rem = begin;
  for (int d = rank - 1; d >= 0; --d) {
    idx[d] = rem % p.dims[d];
    rem /= p.dims[d];
    for (int k = 0; k < nops; ++k) off[k] += idx[d] * p.strides[k][d];
  }
  for (int k = 0; k < nops; ++k) inner[k] = p.strides[k][rank - 1];
  const int last = rank - 1;
  int64_t pos = begin;
  while (pos < end) {
    const int64_t len = std::min(p.dims[last] - idx[last], end - pos);
    run(pos, len, off.data(), inner.data());
    pos += len;
    if (pos >= end) break;
    // The run ended at the end of a row: rewind the innermost dim and carry into the outer ones.
    for (int k = 0; k < nops; ++k) off[k] -= idx[last] * inner[k];
    idx[last] = 0;
    for (int d = last - 1; d >= 0; --d) {
      ++idx[d];
      for (int k = 0; k < nops; ++k) off[k] += p.strides[k][d];
      if (idx[d] < p.dims[d]) break;
      for (int k = 0; k < nops; ++k) off[k] -= idx[d] * p.strides[k][d];
      idx[d] = 0;
    }
  }
}

// RunsInRange over the whole output, chunked with ParallelChunks.
template <typename F>
void ForEachRun(const BroadcastPlan& p, F&& run) {
  ParallelChunks(p.numel, [&](int64_t b, int64_t e) { RunsInRange(p, b, e, run); });
}

// Compute type of a storage type: half types compute in float, everything else in itself.
template <typename T>
struct ComputeTypeOf {
  using type = T;
};
template <>
struct ComputeTypeOf<float16> {
  using type = float;
};
template <>
struct ComputeTypeOf<bfloat16> {
  using type = float;
};
template <typename T>
using ComputeType = typename ComputeTypeOf<T>::type;

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || kIsHalf<T>;

}  // namespace ot::cpu
