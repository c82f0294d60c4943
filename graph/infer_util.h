// Helpers for inference functions: broadcasting, axis normalisation, attribute-or-input reading.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "graph/op_registry.h"

namespace ot {

// Multidirectional (numpy) broadcast of shapes; symbolic dims broadcast when equal or against 1.
Shape BroadcastShapes(const InferContext& ctx, const std::vector<Shape>& shapes);
// Same over static dims; throws Error naming `what` when incompatible.
std::vector<int64_t> BroadcastDims(const std::vector<std::vector<int64_t>>& dims, const std::string& what);
// Maps a possibly negative axis into [0, rank); Fail()s when out of range.
int NormalizeAxis(const InferContext& ctx, int64_t axis, int rank);
int NormalizeAxis(int64_t axis, int rank, const std::string& what);
// Values of input i as int64s if known (nullopt when the input is absent or its value unknown).
std::optional<std::vector<int64_t>> InputInts(const InferContext& ctx, int i);
// Sets output 0 to input 0's dtype and shape.
void PropagateInput0(InferContext& ctx);
// A shape from a size vector's elements (InferContext::input_dims_value): known ones static, the rest symbolic or
// unknown; Fail()s with "<what> has negative dim N" for a known negative element.
std::vector<Dim> SizesOf(const InferContext& ctx, const DimsValue& v, const std::string& what);
// Shape with `rank` unknown dims.
Shape UnknownDims(int rank);

}  // namespace ot
