// Gradient rules of data-movement and selection ops: the gradient goes back the way the data came.
//   Gather      scatter-add of dY into zeros of X's shape (internal GatherGrad(dY, indices, shape(X)) {axis})
//   Concat      each input's part of dY, sliced back out
//   Split       the outputs' gradients concatenated (zeros for outputs that get none)
//   Slice       (graph/grad/index_grad.cc: any steps)
//   Pad         dY sliced (constant mode, non-negative pads)
//   Expand      dY reduced to X's shape
//   Tile        dY summed over the tiles
//   Where       dY to X where cond, to Y elsewhere, each reduced to its shape
//   Dropout     dY * mask / (1 - ratio) in training mode; dY in inference mode
//   Cast        dY cast back to X's dtype
//   Max, Min    dY to each input equal to the result (ties: each tied input gets all of dY)
// Rules that need sizes (Concat, Slice, Pad, Tile, Split's zeros) need them static and the index inputs
// constant, which they are after the exporter's shape arithmetic is folded.
#include <algorithm>
#include <optional>

#include "graph/grad/grad_rules.h"
#include "graph/grad/grad_util.h"
#include "graph/grad_context.h"
#include "graph/infer_util.h"
#include "graph/op_registry.h"

namespace ot {

namespace {

using grad::ConstDouble;
using grad::ConstInts;
using grad::StaticDims;

// Slice(v, starts, ends, axes) in the form of the graph's opset.
Value* SliceOp(GradContext& c, Value* v, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
               const std::vector<int64_t>& axes) {
  if (c.node().opset >= 10) return c.Op("Slice", {v, c.Ints(starts), c.Ints(ends), c.Ints(axes)});
  return c.Op("Slice", {v}, {{"starts", Attribute::Ints(starts)}, {"ends", Attribute::Ints(ends)},
                             {"axes", Attribute::Ints(axes)}});
}



void GatherGradRule(GradContext& c) {
  c.SetGrad(0, c.Op("GatherGrad", {c.dY(0), c.X(1), c.Op("Shape", {c.X(0)})},
                    {{"axis", Attribute::Int(c.node().attr_int("axis", 0))}}, kInternalDomain));
}

void ConcatGrad(GradContext& c) {
  const Node& n = c.node();
  const Shape& y = c.Y(0)->shape;
  if (!y.known_rank()) c.Fail("output rank must be known");
  const int axis = NormalizeAxis(n.attr_int("axis", 0), y.rank(), n.Describe());
  int64_t off = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Shape& s = n.inputs[i]->shape;
    if (!s.known_rank() || !s[axis].is_static()) c.Fail("input sizes along the axis must be static");
    const int64_t len = s[axis].value;
    if (c.needs_grad(static_cast<int>(i))) c.SetGrad(static_cast<int>(i), SliceOp(c, c.dY(0), {off}, {off + len}, {axis}));
    off += len;
  }
}

void SplitGrad(GradContext& c) {
  const Node& n = c.node();
  const Shape& x = c.X(0)->shape;
  if (!x.known_rank()) c.Fail("input rank must be known");
  const int axis = NormalizeAxis(n.attr_int("axis", 0), x.rank(), n.Describe());
  std::vector<Value*> parts;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    Value* g = c.dY(static_cast<int>(i));
    parts.push_back(g ? g : grad::ZerosLike(c, n.outputs[i]));
  }
  c.SetGrad(0, parts.size() == 1 ? parts[0] : c.Op("Concat", parts, {{"axis", Attribute::Int(axis)}}));
}

void PadGrad(GradContext& c) {
  const Node& n = c.node();
  if (n.attr_string("mode", "constant") != "constant") c.Fail("only constant-mode Pad has a gradient");
  const std::vector<int64_t> x = StaticDims(c, c.X(0), "X");
  const int rank = static_cast<int>(x.size());
  std::vector<int64_t> pads;
  std::vector<int64_t> axes;
  if (n.opset >= 11) {
    auto p = ConstInts(n.inputs[1]);
    if (!p) c.Fail("pads must be a constant");
    pads = *p;
    if (n.has_input(3)) {
      auto a = ConstInts(n.inputs[3]);
      if (!a) c.Fail("axes must be a constant");
      axes = *a;
    }
  } else {
    pads = n.attr_ints("pads");
  }
  if (axes.empty())
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  const size_t na = axes.size();
  if (pads.size() != 2 * na) c.Fail("pads must have two values per axis");
  std::vector<int64_t> starts, ends, sl_axes;
  for (size_t i = 0; i < na; ++i) {
    if (pads[i] < 0 || pads[na + i] < 0) c.Fail("negative pads are not supported");
    const int a = NormalizeAxis(axes[i], rank, n.Describe());
    starts.push_back(pads[i]);
    ends.push_back(pads[i] + x[a]);
    sl_axes.push_back(a);
  }
  c.SetGrad(0, SliceOp(c, c.dY(0), starts, ends, sl_axes));
}

void TileGrad(GradContext& c) {
  const std::vector<int64_t> x = StaticDims(c, c.X(0), "X");
  auto reps = ConstInts(c.X(1));
  if (!reps || reps->size() != x.size()) c.Fail("repeats must be a constant with one value per dim");
  // dY viewed as [r0, x0, r1, x1, ...], summed over the r axes.
  std::vector<int64_t> view, axes;
  for (size_t i = 0; i < x.size(); ++i) {
    axes.push_back(static_cast<int64_t>(view.size()));
    view.push_back((*reps)[i]);
    view.push_back(x[i]);
  }
  Value* v = c.Op("Reshape", {c.dY(0), c.Ints(view)});
  Value* s = c.node().opset >= 13 ? c.Op("ReduceSum", {v, c.Ints(axes)}, {{"keepdims", Attribute::Int(0)}})
                                  : c.Op("ReduceSum", {v}, {{"axes", Attribute::Ints(axes)}, {"keepdims", Attribute::Int(0)}});
  c.SetGrad(0, s);
}

void WhereGrad(GradContext& c) {
  Value* zero = c.Scalar(0.0, c.dY(0));
  if (c.needs_grad(1)) c.SetGrad(1, c.ReduceToShape(c.Op("Where", {c.X(0), c.dY(0), zero}), c.X(1)));
  if (c.needs_grad(2)) c.SetGrad(2, c.ReduceToShape(c.Op("Where", {c.X(0), zero, c.dY(0)}), c.X(2)));
}

void DropoutGrad(GradContext& c) {
  const Node& n = c.node();
  // Training mode (as the kernel decides it): opset <= 6 `is_test` = 0; 7-11 never; >= 12 the training_mode
  // input (default false).
  bool training = true;
  if (n.opset <= 6) {
    training = n.attr_int("is_test", 0) == 0;
  } else if (n.opset < 12) {
    training = false;
  } else {
    if (!n.has_input(2)) {
      training = false;
    } else if (auto t = ConstDouble(n.inputs[2])) {
      training = *t != 0;
    }
  }
  if (!training) {
    c.SetGrad(0, c.dY(0));  // inference mode: Y = X
    return;
  }
  if (!n.has_output(1)) c.Fail("Dropout in training mode needs its mask output for the gradient");
  Value* mask = c.Op("Cast", {c.Y(1)}, {{"to", Attribute::Int(static_cast<int64_t>(c.X(0)->dtype))}});
  Value* scale;
  std::optional<double> ratio;
  if (n.opset >= 12) ratio = n.has_input(1) ? ConstDouble(n.inputs[1]) : std::optional<double>(0.5);
  else ratio = n.attr_float("ratio", 0.5f);
  if (ratio) {
    if (*ratio >= 1) c.Fail("ratio must be < 1");
    scale = c.Scalar(1.0 / (1.0 - *ratio), c.X(0));
  } else {
    Value* r = c.Op("Cast", {n.inputs[1]}, {{"to", Attribute::Int(static_cast<int64_t>(c.X(0)->dtype))}});
    scale = c.Op("Div", {c.Scalar(1.0, c.X(0)), c.Op("Sub", {c.Scalar(1.0, c.X(0)), r})});
  }
  c.SetGrad(0, c.Op("Mul", {c.dY(0), c.Op("Mul", {mask, scale})}));
}

// Max/Min: dY to every input equal to the result (each tied input gets all of it), reduced to its shape.
void MaxMinGrad(GradContext& c) {
  Value* zero = c.Scalar(0.0, c.dY(0));
  for (size_t i = 0; i < c.node().inputs.size(); ++i) {
    if (!c.needs_grad(static_cast<int>(i))) continue;
    Value* sel = c.Op("Where", {c.Op("Equal", {c.X(static_cast<int>(i)), c.Y(0)}), c.dY(0), zero});
    c.SetGrad(static_cast<int>(i), c.ReduceToShape(sel, c.X(static_cast<int>(i))));
  }
}

void CastGrad(GradContext& c) {
  if (!IsFloat(c.X(0)->dtype)) c.Fail("cast from a non-float type has no gradient");
  c.SetGrad(0, c.Op("Cast", {c.dY(0)}, {{"to", Attribute::Int(static_cast<int64_t>(c.X(0)->dtype))}}));
}

}  // namespace

void RegisterDataGrads(OpRegistry& r) {
  OpSchema gg;
  gg.op_type = "GatherGrad";
  gg.domain = kInternalDomain;
  gg.value_inputs = {2};
  gg.infer = [](InferContext& ctx) {
    if (auto v = InputInts(ctx, 2)) {
      ctx.set_output(0, ctx.input_type(0), Shape::Static(*v));
      return;
    }
    const Shape& s = ctx.input_shape(2);
    ctx.set_output(0, ctx.input_type(0),
                   s.known_rank() && s.rank() == 1 && s[0].is_static() ? UnknownDims(static_cast<int>(s[0].value))
                                                                       : Shape());
  };
  r.Register(gg);

  r.SetGrad("", "Gather", GatherGradRule, {1});
  r.SetGrad("", "Concat", ConcatGrad);
  r.SetGrad("", "Split", SplitGrad, {1});
  r.SetGrad("", "Pad", PadGrad, {1, 2, 3});
  r.SetGrad("", "Expand", [](GradContext& c) { c.SetGrad(0, c.ReduceToShape(c.dY(0), c.X(0))); }, {1});
  r.SetGrad("", "Tile", TileGrad, {1});
  r.SetGrad("", "Where", WhereGrad, {0});
  r.SetGrad("", "Dropout", DropoutGrad, {1, 2});
  r.SetGrad("", "Cast", CastGrad);
  r.SetGrad("", "Max", MaxMinGrad);
  r.SetGrad("", "Min", MaxMinGrad);
}

}  // namespace ot
