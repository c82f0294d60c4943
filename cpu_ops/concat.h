// Concat and Split as row copies: each operand is viewed as [outer, rows_k * inner] bytes, where outer is the
// product of the dims before the axis, so one memcpy moves one operand's contribution to one outer index.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ot::cpu {

// Output = concatenation of inputs along a dim: outer = product of dims before it; row_bytes[k] = input k's
// size along the dim * product of dims after it * element size.
void Concat(const std::vector<const void*>& ins, const std::vector<int64_t>& row_bytes, void* out, int64_t outer);

// Inverse of Concat: outputs[k] receives row_bytes[k] of every outer row of `in`.
void Split(const void* in, const std::vector<void*>& outs, const std::vector<int64_t>& row_bytes, int64_t outer);

}  // namespace ot::cpu
