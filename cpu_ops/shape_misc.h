// Small generators and selections of the shape family: Trilu, OneHot, EyeLike, Range, TopK.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ot::cpu {

// batch matrices of [rows, cols]; keeps element (i, j) when j - i >= k (upper) or j - i <= k (lower), else 0.
void Trilu(const void* in, void* out, int64_t batch, int64_t rows, int64_t cols, int64_t k, bool upper, size_t esz);

// out [outer, depth, inner] = on where idx[o, i] (negative counted from depth) equals the depth position,
// off elsewhere; indices outside [-depth, depth) give an all-off column.
void OneHot(const int64_t* idx, int64_t outer, int64_t inner, int64_t depth, const void* off, const void* on, void* out,
            size_t esz);

// [rows, cols] zeros with `one` on the diagonal j - i == k.
void EyeLike(void* out, int64_t rows, int64_t cols, int64_t k, const void* one, size_t esz);

// out[i] = start + i * delta for i < n.
template <typename T>
void Range(T start, T delta, int64_t n, T* out);

// in viewed as [outer, axis_dim, inner]; the k largest (or smallest) along the middle dim, in sorted order when
// `sorted` (ties: lower index first), into values/indices viewed as [outer, k, inner].
template <typename T>
void TopK(const T* in, int64_t outer, int64_t axis_dim, int64_t inner, int64_t k, bool largest, bool sorted, T* values,
          int64_t* indices);

}  // namespace ot::cpu
