// Pad (ONNX modes constant, reflect, edge, wrap) over opaque elements of esz bytes. pads_begin may be negative
// (crops); out_dims[k] = in_dims[k] + pads_begin[k] + pads_end[k]. Non-constant modes need every input dim
// that the output reads from to be non-empty (callers check).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ot::cpu {

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

// Maps an input coordinate that may lie outside [0, d) back into it per the mode; -1 for constant mode.
int64_t PadSourceIndex(int64_t i, int64_t d, PadMode mode);

void Pad(const void* in, const std::vector<int64_t>& in_dims, void* out, const std::vector<int64_t>& out_dims,
         const std::vector<int64_t>& pads_begin, PadMode mode, const void* value, size_t esz);

}  // namespace ot::cpu
