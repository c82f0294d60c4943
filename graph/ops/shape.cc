// Op schemas of the shape family, part 1: ops that rearrange or cut a tensor without looking at its values
// (Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split, Slice, Expand, Tile, Pad, DepthToSpace,
// SpaceToDepth). Part 2 (shape_index.cc) holds indexing, generators and the shape readers.
// Inference works on symbolic shapes (unknown values give unknown dims) and on concrete ones at plan time,
// where the executor supplies the values of every `value_inputs` entry.
#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "graph/infer_util.h"
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"
#include "graph/ops/shape_util.h"

namespace ot {
namespace {
using namespace shape_ops;

void InferReshape(InferContext& ctx) {
  const Shape& in = ctx.Require(0);
  const DataType t = ctx.input_type(0);
  // The target's elements: known integers, or sizes followed through the shape computation that made them
  // (symbolic: a named dim read by Shape).
  DimsValue target;
  if (ctx.opset() < 5) {
    if (!ctx.node.has_attr("shape")) ctx.Fail("the shape attribute is required");
    for (int64_t v : ctx.node.attr_ints("shape")) target.push_back(DimOrInt::Int(v));
  } else {
    const Shape& ss = ctx.Require(1);
    std::optional<DimsValue> dv = ctx.input_dims_value(1);
    if (!dv) {
      if (ss.known_rank() && ss.rank() == 1 && ss[0].is_static())
        ctx.set_output(0, t, UnknownDims(static_cast<int>(ss[0].value)));
      else
        ctx.set_output(0, t, Shape());
      return;
    }
    target = std::move(*dv);
  }
  const bool allowzero = ctx.opset() >= 14 && ctx.node.attr_int("allowzero", 0) != 0;
  std::vector<Dim> out;
  int neg = -1;
  bool has_zero = false;
  for (size_t i = 0; i < target.size(); ++i) {
    if (!target[i].known) {  // a size (symbolic or unknown): neither -1 nor a copying 0
      out.push_back(target[i].dim);
      continue;
    }
    const int64_t v = target[i].value;
    if (v == -1) {
      if (neg >= 0) ctx.Fail("the target shape has more than one -1");
      neg = static_cast<int>(i);
      out.push_back(Dim());
    } else if (v == 0 && !allowzero) {
      if (!in.known_rank()) {
        out.push_back(Dim());
      } else {
        if (static_cast<int>(i) >= in.rank())
          ctx.Fail("target dim " + std::to_string(i) + " is 0 (copy) but the input has rank " +
                   std::to_string(in.rank()));
        out.push_back(in[static_cast<int>(i)]);
      }
    } else if (v < 0) {
      ctx.Fail("target shape has invalid dim " + std::to_string(v));
    } else {
      if (v == 0) has_zero = true;
      out.push_back(Dim(v));
    }
  }
  if (allowzero && has_zero && neg >= 0) ctx.Fail("allowzero with both 0 and -1 in the target shape");
  if (in.known_rank()) {
    // Cancel the dims both sides share (static products, symbols by name), then resolve -1 or check the count.
    int64_t in_static = 1, out_static = 1;
    std::multiset<std::string> in_syms, out_syms;
    bool unknown = false;
    for (const Dim& d : in.dims()) {
      if (d.is_static())
        in_static *= d.value;
      else if (!d.symbol.empty())
        in_syms.insert(d.symbol);
      else
        unknown = true;
    }
    for (int i = 0; i < static_cast<int>(out.size()); ++i) {
      if (i == neg) continue;
      const Dim& d = out[i];
      if (d.is_static())
        out_static *= d.value;
      else if (!d.symbol.empty())
        out_syms.insert(d.symbol);
      else
        unknown = true;
    }
    bool matched = !unknown;
    for (const std::string& s : out_syms) {
      auto it = in_syms.find(s);
      if (it == in_syms.end())
        matched = false;
      else
        in_syms.erase(it);
    }
    if (matched) {
      if (neg >= 0) {
        if (in_syms.empty()) {
          if (out_static == 0) {
            if (in_static != 0) ctx.Fail("cannot infer -1: the other target dims have no elements");
            out[neg] = Dim(0);
          } else {
            if (in_static % out_static != 0)
              ctx.Fail("cannot reshape " + in.ToString() + " to " + Shape(out).ToString());
            out[neg] = Dim(in_static / out_static);
          }
        } else if (in_syms.size() == 1 && in_static == out_static && out_static != 0) {
          out[neg] = Dim::Symbol(*in_syms.begin());
        }
      } else if (in_syms.empty() && in_static != out_static) {
        ctx.Fail("cannot reshape " + in.ToString() + " (" + std::to_string(in_static) + " elements) to " +
                 Shape(out).ToString());
      }
    }
  }
  ctx.set_output(0, t, Shape(out));
}

void InferFlatten(InferContext& ctx) {
  const Shape& in = ctx.Require(0);
  int64_t axis = ctx.node.attr_int("axis", 1);
  if (!in.known_rank()) {
    ctx.set_output(0, ctx.input_type(0), UnknownDims(2));
    return;
  }
  const int r = in.rank();
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) ctx.Fail("axis " + std::to_string(ctx.node.attr_int("axis", 1)) + " is out of range");
  const int a = static_cast<int>(axis);
  ctx.set_output(0, ctx.input_type(0), Shape({ProductDim(in.dims(), 0, a), ProductDim(in.dims(), a, r)}));
}

void InferTranspose(InferContext& ctx) {
  const Shape& in = ctx.Require(0);
  std::vector<int64_t> perm = ctx.node.attr_ints("perm");
  if (!in.known_rank()) {
    ctx.set_output(0, ctx.input_type(0), perm.empty() ? Shape() : UnknownDims(static_cast<int>(perm.size())));
    return;
  }
  const int r = in.rank();
  if (perm.empty())
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int>(perm.size()) != r)
    ctx.Fail("perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(r));
  std::vector<bool> seen(r, false);
  std::vector<Dim> out;
  for (int64_t p : perm) {
    int a = NormalizeAxis(ctx, p, r);
    if (seen[a]) ctx.Fail("perm is not a permutation");
    seen[a] = true;
    out.push_back(in[a]);
  }
  ctx.set_output(0, ctx.input_type(0), Shape(out));
}

void InferSqueeze(InferContext& ctx) {
  const Shape& in = ctx.Require(0);
  const DataType t = ctx.input_type(0);
  IntsArg axes = ReadInts(ctx.node, "axes", 1, 13, ValuesOf(ctx));
  if (axes.known && axes.v.empty()) axes.present = false;  // an empty list squeezes every 1, as no list does
  if (!in.known_rank() || (axes.present && !axes.known)) {
    ctx.set_output(0, t, Shape());
    if (in.known_rank() && axes.present) {  // rank known when the number of axes is
      const Shape& as = ctx.input_shape(1);
      if (as.known_rank() && as.rank() == 1 && as[0].is_static() && as[0].value > 0)
        ctx.set_output(0, t, UnknownDims(in.rank() - static_cast<int>(as[0].value)));
    }
    return;
  }
  const int r = in.rank();
  std::vector<bool> drop(r, false);
  if (axes.present) {
    for (int64_t a : axes.v) {
      int ax = NormalizeAxis(ctx, a, r);
      if (drop[ax]) ctx.Fail("axis " + std::to_string(a) + " is repeated");
      if (in[ax].is_static() && in[ax].value != 1)
        ctx.Fail("cannot squeeze axis " + std::to_string(a) + " of size " + std::to_string(in[ax].value));
      drop[ax] = true;
    }
  } else {
    for (int i = 0; i < r; ++i) {
      if (!in[i].is_static()) {  // whether it is 1 decides the rank
        ctx.set_output(0, t, Shape());
        return;
      }
      drop[i] = in[i].value == 1;
    }
  }
  std::vector<Dim> out;
  for (int i = 0; i < r; ++i)
    if (!drop[i]) out.push_back(in[i]);
  ctx.set_output(0, t, Shape(out));
}

void InferUnsqueeze(InferContext& ctx) {
  const Shape& in = ctx.Require(0);
  const DataType t = ctx.input_type(0);
  IntsArg axes = ReadInts(ctx.node, "axes", 1, 13, ValuesOf(ctx));
  if (!axes.present) ctx.Fail("axes are required");
  if (!in.known_rank() || !axes.known) {
    ctx.set_output(0, t, Shape());
    if (in.known_rank()) {  // rank known when the number of axes is
      const Shape& as = ctx.input_shape(1);
      if (as.known_rank() && as.rank() == 1 && as[0].is_static())
        ctx.set_output(0, t, UnknownDims(in.rank() + static_cast<int>(as[0].value)));
    }
    return;
  }
  const int r = in.rank() + static_cast<int>(axes.v.size());
  std::vector<bool> ins(r, false);
  for (int64_t a : axes.v) {
    int ax = NormalizeAxis(ctx, a, r);
    if (ins[ax]) ctx.Fail("axis " + std::to_string(a) + " is repeated");
    ins[ax] = true;
  }
  std::vector<Dim> out;
  int j = 0;
  for (int i = 0; i < r; ++i) out.push_back(ins[i] ? Dim(1) : in[j++]);
  ctx.set_output(0, t, Shape(out));
}

void InferConcat(InferContext& ctx) {
  if (ctx.num_inputs() == 0) ctx.Fail("Concat needs at least one input");
  if (!ctx.node.has_attr("axis") && ctx.opset() >= 4) ctx.Fail("the axis attribute is required");
  const int64_t axis_attr = ctx.node.attr_int("axis", 1);
  const DataType t = ctx.input_type(0);
  int rank = -1;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Shape& s = ctx.Require(i);
    if (ctx.input_type(i) != t)
      ctx.Fail("input " + std::to_string(i) + " is " + DataTypeName(ctx.input_type(i)) + ", input 0 is " +
               DataTypeName(t));
    if (!s.known_rank()) continue;
    if (rank >= 0 && s.rank() != rank)
      ctx.Fail("inputs have different ranks (" + std::to_string(rank) + " and " + std::to_string(s.rank()) + ")");
    rank = s.rank();
  }
  if (rank < 0) {
    ctx.set_output(0, t, Shape());
    return;
  }
  if (rank == 0) ctx.Fail("cannot concatenate scalars");
  const int axis = NormalizeAxis(ctx, axis_attr, rank);
  std::vector<Dim> out(rank, Dim());
  int64_t sum = 0;
  bool sum_known = true;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Shape& s = ctx.input_shape(i);
    if (!s.known_rank()) {
      sum_known = false;
      continue;
    }
    for (int d = 0; d < rank; ++d) {
      if (d == axis) {
        if (s[d].is_static())
          sum += s[d].value;
        else
          sum_known = false;
        continue;
      }
      if (out[d].is_static() && s[d].is_static() && out[d].value != s[d].value)
        ctx.Fail("input " + std::to_string(i) + " has dim " + std::to_string(d) + " = " + std::to_string(s[d].value) +
                 ", expected " + std::to_string(out[d].value));
      out[d] = MergeDim(out[d], s[d]);
    }
  }
  out[axis] = sum_known ? Dim(sum) : Dim();
  ctx.set_output(0, t, Shape(out));
}

void InferSplit(InferContext& ctx) {
  const Shape& in = ctx.Require(0);
  const DataType t = ctx.input_type(0);
  const int n = ctx.num_outputs();
  if (!in.known_rank()) {
    for (int i = 0; i < n; ++i) ctx.set_output(i, t, Shape());
    return;
  }
  const int axis = NormalizeAxis(ctx, ctx.node.attr_int("axis", 0), in.rank());
  std::optional<std::vector<int64_t>> sizes;
  if (in[axis].is_static()) {
    sizes = ReadSplitSizes(ctx.node, ValuesOf(ctx), in[axis].value, n);
  } else {
    IntsArg split = ReadInts(ctx.node, "split", 1, 13, ValuesOf(ctx));
    if (split.known) sizes = split.v;
    if (sizes && static_cast<int>(sizes->size()) != n) ctx.Fail("split length does not match the outputs");
  }
  for (int i = 0; i < n; ++i) {
    std::vector<Dim> d = in.dims();
    d[axis] = sizes ? Dim((*sizes)[i]) : Dim();
    ctx.set_output(i, t, Shape(d));
  }
}

void InferSlice(InferContext& ctx) {
  const Shape& in = ctx.Require(0);
  const DataType t = ctx.input_type(0);
  if (!in.known_rank()) {
    ctx.set_output(0, t, Shape());
    return;
  }
  const int r = in.rank();
  std::optional<SliceArgs> a = ReadSliceArgs(ctx.node, ValuesOf(ctx), r);
  if (!a) {
    ctx.set_output(0, t, UnknownDims(r));
    return;
  }
  std::vector<Dim> out = in.dims();
  for (size_t i = 0; i < a->axes.size(); ++i) {
    const int ax = static_cast<int>(a->axes[i]);
    const int64_t st = a->starts[i], en = a->ends[i], step = a->steps[i];
    if (in[ax].is_static()) {
      out[ax] = Dim(NormalizeSlice(in[ax].value, st, en, step).count);
    } else if (st == 0 && step == 1 && en >= std::numeric_limits<int32_t>::max()) {
      out[ax] = in[ax];  // the whole dim
    } else {
      out[ax] = Dim();
    }
  }
  ctx.set_output(0, t, Shape(out));
}

void InferExpand(InferContext& ctx) {
  const Shape& in = ctx.Require(0);
  const Shape& ss = ctx.Require(1);
  const DataType t = ctx.input_type(0);
  std::optional<DimsValue> target = ctx.input_dims_value(1);
  if (!target) {
    if (in.known_rank() && ss.known_rank() && ss.rank() == 1 && ss[0].is_static())
      ctx.set_output(0, t, UnknownDims(std::max<int>(in.rank(), static_cast<int>(ss[0].value))));
    else
      ctx.set_output(0, t, Shape());
    return;
  }
  ctx.set_output(0, t, BroadcastShapes(ctx, {in, Shape(SizesOf(ctx, *target, "shape"))}));
}

void InferTile(InferContext& ctx) {
  const Shape& in = ctx.Require(0);
  ctx.Require(1);
  const DataType t = ctx.input_type(0);
  std::optional<std::vector<int64_t>> reps = InputInts(ctx, 1);
  if (!in.known_rank()) {
    ctx.set_output(0, t, Shape());
    return;
  }
  if (!reps) {
    ctx.set_output(0, t, UnknownDims(in.rank()));
    return;
  }
  if (static_cast<int>(reps->size()) != in.rank())
    ctx.Fail("repeats has " + std::to_string(reps->size()) + " values for rank " + std::to_string(in.rank()));
  std::vector<Dim> out;
  for (int i = 0; i < in.rank(); ++i) {
    if ((*reps)[i] < 0) ctx.Fail("repeats must be non-negative");
    out.push_back(MulDim(in[i], (*reps)[i]));
  }
  ctx.set_output(0, t, Shape(out));
}

void InferPad(InferContext& ctx) {
  const Shape& in = ctx.Require(0);
  const DataType t = ctx.input_type(0);
  const std::string mode = ctx.node.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && !(mode == "wrap" && ctx.opset() >= 19))
    ctx.Unsupported("mode '" + mode + "' is not supported");
  if (ctx.has_input(2) && ctx.input_type(2) != t) ctx.Fail("constant_value dtype differs from the data");
  if (!in.known_rank()) {
    ctx.set_output(0, t, Shape());
    return;
  }
  std::optional<PadArgs> p = ReadPadArgs(ctx.node, ValuesOf(ctx), in.rank());
  if (!p) {
    ctx.set_output(0, t, UnknownDims(in.rank()));
    return;
  }
  std::vector<Dim> out;
  for (int i = 0; i < in.rank(); ++i) {
    const int64_t add = p->begin[i] + p->end[i];
    if (!in[i].is_static()) {
      out.push_back(add == 0 ? in[i] : Dim());
      continue;
    }
    const int64_t d = in[i].value + add;
    if (d < 0) ctx.Fail("pads make dim " + std::to_string(i) + " negative");
    if (mode != "constant" && in[i].value == 0 && d > 0)
      ctx.Fail("cannot pad an empty dim " + std::to_string(i) + " in mode " + mode);
    out.push_back(Dim(d));
  }
  ctx.set_output(0, t, Shape(out));
}

// DepthToSpace (to_space) and SpaceToDepth: rank-4 NCHW.
void InferSpaceDepth(InferContext& ctx, bool to_space) {
  const Shape& in = ctx.Require(0);
  const DataType t = ctx.input_type(0);
  const int64_t b = ctx.node.attr_int("blocksize", 0);
  if (b <= 0) ctx.Fail("blocksize must be positive");
  if (to_space) {
    const std::string mode = ctx.node.attr_string("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") ctx.Fail("mode must be DCR or CRD, got '" + mode + "'");
  }
  if (!in.known_rank()) {
    ctx.set_output(0, t, UnknownDims(4));
    return;
  }
  if (in.rank() != 4) ctx.Fail("input must have rank 4, got " + in.ToString());
  std::vector<Dim> out = in.dims();
  if (to_space) {
    if (in[1].is_static()) {
      if (in[1].value % (b * b) != 0)
        ctx.Fail("channels " + std::to_string(in[1].value) + " are not divisible by blocksize^2");
      out[1] = Dim(in[1].value / (b * b));
    } else {
      out[1] = Dim();
    }
    out[2] = MulDim(in[2], b);
    out[3] = MulDim(in[3], b);
  } else {
    out[1] = MulDim(in[1], b * b);
    for (int d = 2; d < 4; ++d) {
      if (!in[d].is_static()) {
        out[d] = Dim();
        continue;
      }
      if (in[d].value % b != 0) ctx.Fail("spatial dims " + in.ToString() + " are not divisible by the blocksize");
      out[d] = Dim(in[d].value / b);
    }
  }
  ctx.set_output(0, t, Shape(out));
}

}  // namespace

void RegisterShapeOps(OpRegistry& r) {
  r.Register(Schema("Reshape", 1, InferReshape, {1}));
  r.Register(Schema("Flatten", 1, InferFlatten));
  r.Register(Schema("Transpose", 1, InferTranspose));
  r.Register(Schema("Squeeze", 1, InferSqueeze, {1}));
  r.Register(Schema("Unsqueeze", 1, InferUnsqueeze, {1}));
  r.Register(Schema("Concat", 1, InferConcat));
  r.Register(Schema("Split", 2, InferSplit, {1}));
  r.Register(Schema("Slice", 1, InferSlice, {1, 2, 3, 4}));
  r.Register(Schema("Expand", 8, InferExpand, {1}));
  r.Register(Schema("Tile", 6, InferTile, {1}));
  r.Register(Schema("Pad", 1, InferPad, {1, 2, 3}));
  r.Register(Schema("DepthToSpace", 1, [](InferContext& c) { InferSpaceDepth(c, true); }));
  r.Register(Schema("SpaceToDepth", 1, [](InferContext& c) { InferSpaceDepth(c, false); }));
  RegisterShapeIndexOps(r);
}

}  // namespace ot
