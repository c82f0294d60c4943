// Scatter-add, the backward of Gather: dX (viewed as [outer, axis_dim, inner]) = 0, then for every (o, j, i)
// dX[o, idx[j], i] += dY[o, j, i], with negative indices counted from the end. Sequential over j inside each
// outer slice: deterministic. I = int32_t or int64_t; T = float or double.
#pragma once
#include <cstdint>

namespace ot::cpu {

// Returns false (after zeroing dx) when an index is out of range.
template <typename T, typename I>
bool GatherGrad(const T* dy, const I* idx, int64_t num_idx, int64_t outer, int64_t axis_dim, int64_t inner, T* dx);

}  // namespace ot::cpu
