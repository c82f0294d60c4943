// Helpers shared by the shape family's schemas (graph/ops/shape*.cc) and its CPU kernel factories
// (executor/kernels/shape*.cc): reading opset-dependent arguments (attribute before opset N, input from N),
// Slice normalisation, symbolic dim arithmetic.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace ot::shape_ops {

// Input i's value, nullptr when absent or unknown.
using ValueOf = std::function<const Tensor*(int)>;
ValueOf ValuesOf(const InferContext& ctx);

struct IntsArg {
  bool present = false;  // the attribute or input is given
  bool known = false;    // its value is known (always for attributes)
  std::vector<int64_t> v;
};
// Attribute `attr` for node opsets below `input_from`, input `input` from that opset on.
IntsArg ReadInts(const Node& n, const std::string& attr, int input, int input_from, const ValueOf& val);

// Product of dims[begin, end): static when all are static; the symbolic dim itself when it is the only one
// not equal to 1; unknown otherwise.
Dim ProductDim(const std::vector<Dim>& dims, int begin, int end);
Dim MulDim(const Dim& d, int64_t k);
// Two dims that must be equal: the static one wins, else the named one.
Dim MergeDim(const Dim& a, const Dim& b);

// One axis of a Slice over a dim of static size, normalised per the ONNX spec (negative start/end counted from
// the end, clamped to [0, dim] for positive steps and [-1, dim-1] for negative ones).
struct SliceAxis {
  int64_t start = 0, step = 1, count = 0;
};
SliceAxis NormalizeSlice(int64_t dim, int64_t start, int64_t end, int64_t step);

// Slice's starts/ends/axes/steps from attributes (opset < 10) or inputs 1..4; nullopt when a value is unknown.
// axes are normalised against `rank` (defaults 0..n-1), steps default to 1; throws Error on bad arguments.
struct SliceArgs {
  std::vector<int64_t> starts, ends, axes, steps;
};
std::optional<SliceArgs> ReadSliceArgs(const Node& n, const ValueOf& val, int rank);
// The same from inputs first..first+3 (starts, ends, optional axes and steps) whatever the node's opset: Slice's from
// opset 10 (first = 1) and the internal SliceGrad's (first = 2).
std::optional<SliceArgs> ReadSliceInputs(const Node& n, const ValueOf& val, int rank, int first);

// Pad's per-dim begin/end pads (full rank, from attributes before opset 11, inputs 1 and 3 from it);
// nullopt when unknown. Throws Error on bad arguments.
struct PadArgs {
  std::vector<int64_t> begin, end;
  std::string mode;
};
std::optional<PadArgs> ReadPadArgs(const Node& n, const ValueOf& val, int rank);

// Split's part sizes along an axis of static size `dim` for `outputs` outputs (split attribute/input or equal
// parts; opset 18 num_outputs gives ceil-sized parts with a smaller last one). nullopt when unknown.
std::optional<std::vector<int64_t>> ReadSplitSizes(const Node& n, const ValueOf& val, int64_t dim, int outputs);

// Constant's output from its attribute (value, value_float(s), value_int(s)); UnsupportedError for strings and
// sparse tensors, Error when none is given.
Tensor ConstantValue(const Node& n);

// Shape's [start, end) over a rank (opset 15 attributes, clamped as the spec says).
std::pair<int, int> ShapeRange(const Node& n, int rank);

// An ai.onnx schema entry.
OpSchema Schema(const std::string& op, int min_opset, InferFn infer, std::vector<int> value_inputs = {},
                bool reads_input_data = true);

void RegisterShapeIndexOps(OpRegistry& r);

}  // namespace ot::shape_ops
