// ScatterElements and ScatterND: out = copy of data, then updates applied one by one in index order
// (sequential, so duplicate indices give a deterministic result: the last one wins for `none`, the
// reduction accumulates in order otherwise). Indices are validated by the caller (gather.h FindBadIndex*).
#pragma once
#include <cstdint>
#include <vector>

namespace ot::cpu {

enum class ScatterReduction { kNone, kAdd, kMul, kMax, kMin };

// out[i with its `axis` coordinate replaced by idx[i]] (op)= upd[i] for every i of idx_dims (= upd dims).
template <typename T, typename I>
void ScatterElements(const T* data, const std::vector<int64_t>& data_dims, const I* idx, const T* upd,
                     const std::vector<int64_t>& idx_dims, int axis, ScatterReduction red, T* out);

// idx: [..., k]; each tuple addresses a slice data[t0, ..., t_{k-1}, :...] that receives the matching slice of
// upd (shape idx_dims[:-1] + data_dims[k:]).
template <typename T, typename I>
void ScatterND(const T* data, const std::vector<int64_t>& data_dims, const I* idx, const std::vector<int64_t>& idx_dims,
               const T* upd, ScatterReduction red, T* out);

}  // namespace ot::cpu
