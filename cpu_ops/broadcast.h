// N-d broadcasting over raw buffers: per-input element strides into a common output shape (0 on broadcast
// dims), and an odometer that walks the output in row-major order. Kernels know nothing of the IR.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ot::cpu {

// Element strides of a row-major tensor of `in_dims` seen through `out_dims` (right-aligned; a dim of 1 that
// broadcasts has stride 0). Requires in_dims.size() <= out_dims.size().
std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& in_dims, const std::vector<int64_t>& out_dims);

// Collapses adjacent dims that are contiguous for every operand, so inner loops are long.
// dims and each strides[k] are rewritten in place (all the same length).
void CoalesceDims(std::vector<int64_t>& dims, std::vector<std::vector<int64_t>>& strides);

// Calls f(out_index, offsets) for output elements [begin, end) in row-major order, where offsets[k] is the
// element offset into operand k. Offsets are updated incrementally (no division in the loop body).
template <typename F>
void ForEachBroadcast(const std::vector<int64_t>& dims, const std::vector<std::vector<int64_t>>& strides, int64_t begin,
                      int64_t end, F&& f) {
  const int rank = static_cast<int>(dims.size());
  const size_t nops = strides.size();
  std::vector<int64_t> idx(rank, 0), off(nops, 0);
  int64_t rem = begin;
  for (int d = rank - 1; d >= 0; --d) {
    idx[d] = dims[d] ? rem % dims[d] : 0;
    rem = dims[d] ? rem / dims[d] : 0;
    for (size_t k = 0; k < nops; ++k) off[k] += idx[d] * strides[k][d];
  }
  for (int64_t i = begin; i < end; ++i) {
    f(i, off.data());
    for (int d = rank - 1; d >= 0; --d) {
      ++idx[d];
      for (size_t k = 0; k < nops; ++k) off[k] += strides[k][d];
      if (idx[d] < dims[d]) break;
      for (size_t k = 0; k < nops; ++k) off[k] -= idx[d] * strides[k][d];
      idx[d] = 0;
    }
  }
}

}  // namespace ot::cpu
