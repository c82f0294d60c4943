// Gradient rules of data-movement and selection ops: the gradient goes back the way the data came.
//   Gather      scatter-add of dY into zeros of X's shape (internal GatherGrad(dY, indices, shape(X)) {axis})
//   Concat      each input's part of dY, sliced back out
//   Split       the outputs' gradients concatenated (zeros for outputs that get none)
//   Slice       (graph/grad/index_grad.cc: any steps)
//   Pad         dY padded by the negated pads (constant mode; crops where the forward padded)
//   Expand      dY reduced to X's shape
//   Tile        dY summed over the tiles
//   Where       dY to X where cond, to Y elsewhere, each reduced to its shape
//   Dropout     dY * mask / (1 - ratio) in training mode; dY in inference mode
//   Cast        dY cast back to X's dtype
//   Max, Min    dY to each input equal to the result (ties: each tied input gets all of dY)
// Sizes a rule needs (Concat's offsets, Tile's view, Split's zeros) are constants where static and read in the step
// graph (Shape of the forward input) where not; index inputs are the forward's own. The plan folds both.
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

// Slice(v, starts, ends, axes) in the form of the graph's opset.
Value* SliceOp(GradContext& c, Value* v, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
               const std::vector<int64_t>& axes) {
  if (c.node().opset >= 10) return c.Op("Slice", {v, c.Ints(starts), c.Ints(ends), c.Ints(axes)});
  return c.Op("Slice", {v},
              {{"starts", Attribute::Ints(starts)}, {"ends", Attribute::Ints(ends)}, {"axes", Attribute::Ints(axes)}});
}

void GatherGradRule(GradContext& c) {
  c.SetGrad(0, c.Op("GatherGrad", {c.dY(0), c.X(1), c.Op("Shape", {c.X(0)})},
                    {{"axis", Attribute::Int(c.node().attr_int("axis", 0))}}, kInternalDomain));
}

// Each input's part of dY sliced back out, at offsets that are constants where the sizes along the axis are static
// and sums of Shape reads where they are not (the class token before a batch of patches).
void ConcatGrad(GradContext& c) {
  const Node& n = c.node();
  const int rank = grad::Rank(c, c.Y(0), "the output");
  const int axis = NormalizeAxis(n.attr_int("axis", 0), rank, n.Describe());
  grad::SizeElem off{0, nullptr};
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    grad::Rank(c, n.inputs[i], "input " + std::to_string(i));
    const grad::SizeElem len = grad::DimOf(c, n.inputs[i], axis);
    const grad::SizeElem end = grad::Arith(c, "Add", off, len);
    if (c.needs_grad(static_cast<int>(i))) {
      Value* part;
      if (off.k && end.k) {
        part = SliceOp(c, c.dY(0), {*off.k}, {*end.k}, {axis});
      } else {
        if (n.opset < 10) c.Fail("input sizes along the axis must be static before opset 10 (Slice takes no inputs)");
        part = c.Op("Slice", {c.dY(0), grad::ValueOf(c, off), grad::ValueOf(c, end), c.Ints({axis})});
      }
      c.SetGrad(static_cast<int>(i), part);
    }
    off = end;
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

// Y = Pad(X, pads) in constant mode: dX = Pad(dY, -pads) with zeros -- where the forward added a border the
// backward crops it, where it cropped (a negative pad) the backward puts zeros back. pads from the forward's own
// input, negated in the step graph where they are not constants.
void PadGrad(GradContext& c) {
  const Node& n = c.node();
  if (n.attr_string("mode", "constant") != "constant") c.Fail("only constant-mode Pad has a gradient");
  grad::Rank(c, c.X(0), "X");
  if (n.opset < 11) {
    std::vector<int64_t> pads = n.attr_ints(n.opset < 2 ? "paddings" : "pads");
    for (int64_t& p : pads) p = -p;
    c.SetGrad(0, c.Op("Pad", {c.dY(0)}, {{"pads", Attribute::Ints(pads)}}));
    return;
  }
  Value* neg;
  if (auto p = ConstInts(n.inputs[1])) {
    for (int64_t& v : *p) v = -v;
    neg = c.Ints(*p);
  } else {
    neg = c.Op("Neg", {n.inputs[1]});
  }
  std::vector<Value*> in{c.dY(0), neg};
  if (n.has_input(3)) in.insert(in.end(), {nullptr, n.inputs[3]});
  c.SetGrad(0, c.Op("Pad", in));
}

// dY viewed as [r0, x0, r1, x1, ...] (repeats and X's dims, read in the step graph where not known), summed over
// the r axes.
void TileGrad(GradContext& c) {
  const int rank = grad::Rank(c, c.X(0), "X");
  auto reps = ConstInts(c.X(1));
  if (reps && static_cast<int>(reps->size()) != rank) c.Fail("repeats must have one value per dim");
  std::vector<grad::SizeElem> view;
  std::vector<int64_t> axes;
  for (int i = 0; i < rank; ++i) {
    axes.push_back(static_cast<int64_t>(view.size()));
    view.push_back(reps ? grad::SizeElem{(*reps)[i], nullptr}
                        : grad::SizeElem{std::nullopt, c.Op("Gather", {c.X(1), c.Ints({i})})});
    view.push_back(grad::DimOf(c, c.X(0), i));
  }
  Value* v = c.Op("Reshape", {c.dY(0), grad::SizesValue(c, view)});
  c.SetGrad(0, grad::ReduceSumAxes(c, v, axes, /*keepdims=*/false));
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
  if (n.opset >= 12)
    ratio = n.has_input(1) ? ConstDouble(n.inputs[1]) : std::optional<double>(0.5);
  else
    ratio = n.attr_float("ratio", 0.5f);
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
    if (std::optional<DimsValue> target = ctx.input_dims_value(2)) {  // known, or named through a Shape of X
      ctx.set_output(0, ctx.input_type(0), Shape(SizesOf(ctx, *target, "X's shape")));
      return;
    }
    const Shape& s = ctx.input_shape(2);
    ctx.set_output(
        0, ctx.input_type(0),
        s.known_rank() && s.rank() == 1 && s[0].is_static() ? UnknownDims(static_cast<int>(s[0].value)) : Shape());
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
