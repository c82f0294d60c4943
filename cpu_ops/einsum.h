// Building blocks of Einsum: a strided gather with summation (transpose, diagonal, broadcast and reduction in
// one pass), used before and after the batched GEMM (cpu_ops/matmul.h) that does the contraction.
#pragma once
#include <cstdint>
#include <vector>

namespace ot::cpu {

// dst[o] for o over out_dims (row-major, contiguous) = sum over r in red_dims of
//   src[sum_d o_d * out_strides[d] + sum_e r_e * red_strides[e]]
// Strides are in elements and may be 0 (broadcast) or sums of several axes' strides (a diagonal).
// Each output element is one task's sequential sum (accumulated in double, or int64 for integers).
template <typename T>
void StridedReduceCopy(const T* src, const std::vector<int64_t>& out_dims, const std::vector<int64_t>& out_strides,
                       const std::vector<int64_t>& red_dims, const std::vector<int64_t>& red_strides, T* dst);

}  // namespace ot::cpu
