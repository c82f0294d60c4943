// Data movement by strides: the copy at the heart of Slice, Expand, Tile, Split and the identity-like ops.
// Elements are moved as opaque bytes of `esz` bytes each (1, 2, 4, 8 take fast paths; any size works), so one
// kernel serves every dtype. Large copies run in parallel over rows with a fixed split.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ot::cpu {

// memcpy of n bytes, in parallel chunks when large.
void CopyBytes(void* dst, const void* src, size_t n);

// Fills n elements of esz bytes at dst with the element at `value`.
void FillElements(void* dst, int64_t n, const void* value, size_t esz);

// Writes a row-major output of `dims`: out[i_0, ..., i_{r-1}] = in[base + sum_k i_k * in_strides[k]].
// Strides and base are in elements and may be zero (broadcast) or negative (reversed slices).
void StridedCopy(const void* in, int64_t base, void* out, size_t esz, std::vector<int64_t> dims,
                 std::vector<int64_t> in_strides);

// Slice of a row-major tensor of `in_dims`: output dim k takes out_dims[k] elements starting at starts[k] with
// step steps[k] (negative steps walk backwards). starts must be valid indices where out_dims[k] > 0.
void Slice(const void* in, void* out, size_t esz, const std::vector<int64_t>& in_dims,
           const std::vector<int64_t>& starts, const std::vector<int64_t>& steps, const std::vector<int64_t>& out_dims);

// The gradient of Slice: out (row-major over `out_dims`, every element written) is zero except where the forward
// Slice read it, which takes the matching element of `in` (row-major over `in_dims`, the Slice's output dims).
// starts/steps as for Slice (starts valid where in_dims[k] > 0); the taken elements are distinct, so nothing sums.
void SliceBackward(const void* in, void* out, size_t esz, const std::vector<int64_t>& in_dims,
                   const std::vector<int64_t>& starts, const std::vector<int64_t>& steps,
                   const std::vector<int64_t>& out_dims);

// Row-major element strides of dims.
std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& dims);
// Product of dims (1 for none).
int64_t NumElementsOf(const std::vector<int64_t>& dims);

}  // namespace ot::cpu
