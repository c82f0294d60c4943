// Expand (numpy broadcast to a larger shape) and Tile (repeat along each dim), both as strided copies with
// zero strides: Tile views the input as [r0, d0, r1, d1, ...] with stride 0 on every repeat dim.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ot::cpu {

// out_dims must be a broadcast of in_dims (right-aligned; in dims are 1 or equal).
void Expand(const void* in, const std::vector<int64_t>& in_dims, void* out, const std::vector<int64_t>& out_dims,
            size_t esz);

// out dim k = in_dims[k] * repeats[k].
void Tile(const void* in, const std::vector<int64_t>& in_dims, const std::vector<int64_t>& repeats, void* out,
          size_t esz);

}  // namespace ot::cpu
