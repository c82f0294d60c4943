// Op schemas of the reduction family: Reduce* (axes as an attribute, or as input 1 from opset 18 — ReduceSum
// from opset 13), ArgMax/ArgMin and CumSum.
#include <algorithm>
#include <set>

#include "graph/infer_util.h"
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {

namespace {

const char* const kReduceOps[] = {"ReduceSum", "ReduceMean", "ReduceMax",    "ReduceMin",       "ReduceProd",
                                  "ReduceL1",  "ReduceL2",   "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};

bool AxesFromInput(const std::string& op, int opset) { return op == "ReduceSum" ? opset >= 13 : opset >= 18; }

void InferReduce(InferContext& ctx) {
  const Node& n = ctx.node;
  const Shape& in = ctx.Require(0);
  const bool keepdims = n.attr_int("keepdims", 1) != 0;
  const bool noop = n.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<int64_t> axes;
  if (AxesFromInput(n.op_type, n.opset)) {
    if (n.has_attr("axes")) ctx.Fail("axes is an input from this opset, not an attribute");
    if (ctx.has_input(1)) {
      const Shape& as = ctx.input_shape(1);
      if (as.known_rank() && as.rank() > 1) ctx.Fail("axes must be 1-D, got shape " + as.ToString());
      auto v = InputInts(ctx, 1);
      if (!v) {
        // Axes unknown: the rank survives with keepdims, and without it when their count is known (distinct axes).
        Shape out;
        if (in.known_rank() && keepdims)
          out = UnknownDims(in.rank());
        else if (in.known_rank() && as.known_rank() && as.rank() == 1 && as[0].is_static() && as[0].value > 0 &&
                 as[0].value <= in.rank())
          out = UnknownDims(in.rank() - static_cast<int>(as[0].value));
        ctx.set_output(0, ctx.input_type(0), out);
        return;
      }
      axes = *v;
    }
  } else {
    axes = n.attr_ints("axes");
  }
  if (axes.empty() && noop) {
    PropagateInput0(ctx);
    return;
  }
  if (!in.known_rank()) {  // all axes reduced without keepdims: a scalar whatever the rank
    ctx.set_output(0, ctx.input_type(0), axes.empty() && !keepdims ? Shape::Scalar() : Shape());
    return;
  }
  const int rank = in.rank();
  std::vector<bool> red(rank, axes.empty());
  for (int64_t a : axes) {
    int d = NormalizeAxis(ctx, a, rank);
    if (rank == 0) continue;
    if (red[d] && !axes.empty()) {
      // A repeated axis is a user error in the spec's terms.
      int count = 0;
      for (int64_t b : axes) count += NormalizeAxis(ctx, b, rank) == d;
      if (count > 1) ctx.Fail("axis " + std::to_string(a) + " is repeated in axes");
    }
    red[d] = true;
  }
  std::vector<Dim> out;
  for (int d = 0; d < rank; ++d) {
    if (!red[d])
      out.push_back(in[d]);
    else if (keepdims)
      out.push_back(Dim(1));
  }
  ctx.set_output(0, ctx.input_type(0), Shape(out));
}

void InferArg(InferContext& ctx) {
  const Node& n = ctx.node;
  const Shape& in = ctx.Require(0);
  const bool keepdims = n.attr_int("keepdims", 1) != 0;
  if (!in.known_rank()) {
    ctx.set_output(0, DataType::kInt64, Shape());
    return;
  }
  if (in.rank() == 0) ctx.Fail("input must have rank >= 1");
  const int axis = NormalizeAxis(ctx, n.attr_int("axis", 0), in.rank());
  if (in[axis].is_static() && in[axis].value == 0) ctx.Fail("cannot take the arg max/min over an empty axis");
  std::vector<Dim> out;
  for (int d = 0; d < in.rank(); ++d) {
    if (d != axis)
      out.push_back(in[d]);
    else if (keepdims)
      out.push_back(Dim(1));
  }
  ctx.set_output(0, DataType::kInt64, Shape(out));
}

void InferCumSum(InferContext& ctx) {
  const Shape& in = ctx.Require(0);
  const Shape& as = ctx.Require(1);
  if (ctx.input_type(1) != DataType::kInt32 && ctx.input_type(1) != DataType::kInt64)
    ctx.Fail("axis must be int32 or int64, got " + DataTypeName(ctx.input_type(1)));
  if (as.known_rank() && as.rank() > 1) ctx.Fail("axis must be a scalar, got shape " + as.ToString());
  if (auto v = InputInts(ctx, 1); v && in.known_rank()) {
    if (v->size() != 1) ctx.Fail("axis must hold one value");
    NormalizeAxis(ctx, (*v)[0], in.rank());
  }
  PropagateInput0(ctx);
}

}  // namespace

void RegisterReductionOps(OpRegistry& r) {
  for (const char* op : kReduceOps) {
    OpSchema s;
    s.op_type = op;
    s.min_opset = 1;
    s.infer = InferReduce;
    s.value_inputs = {1};
    s.fusible = FusibleKind::kReduction;
    r.Register(std::move(s));
  }
  for (const char* op : {"ArgMax", "ArgMin"}) {
    OpSchema s;
    s.op_type = op;
    s.min_opset = 1;
    s.infer = InferArg;
    r.Register(std::move(s));
  }
  OpSchema c;
  c.op_type = "CumSum";
  c.min_opset = 11;
  c.infer = InferCumSum;
  r.Register(std::move(c));
}

}  // namespace ot
