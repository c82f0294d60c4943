// Gradient rules of Slice (any steps), the element-indexed ops, Trilu, TopK, CumSum and DepthToSpace/
// SpaceToDepth, with standard ops only:
//   Slice            ai.onnxtrain.SliceGrad(dY, Shape(X), starts, ends, axes, steps): dY put back where the slice
//                    took it, zeros elsewhere (any steps; indices and dims read when the step runs)
//   GatherElements   dData = ScatterElements(zeros, indices, dY) {reduction = add}: repeated indices accumulate,
//                    in index order (the CPU kernel is sequential, so the sum is deterministic)
//   GatherND         dData = ScatterND(zeros, indices, dY) {reduction = add} (batch_dims 0 only)
//   ScatterElements  reduction none: dData = dY with the written positions zeroed (ScatterElements of zeros),
//                    dUpdates = GatherElements(dY, indices). Where indices repeat, the forward keeps the last
//                    write but every duplicate's update gets dY at that position (as torch.scatter's backward).
//                    reduction add: dData = dY, dUpdates = GatherElements(dY, indices). mul/max/min: an error.
//   ScatterND        as ScatterElements, with GatherND(dY, indices) for dUpdates
//   Trilu            the same triangle of dY
//   TopK             dValues scattered (ScatterElements, Scatter before opset 11) to Indices' positions
//   CumSum           CumSum of dY with `reverse` flipped
//   DepthToSpace, SpaceToDepth  the forward's Reshape/Transpose/Reshape undone (both modes)
// The reduction attribute of ScatterElements/ScatterND is ONNX opset 16; our executor accepts it at every opset
// it runs these ops at (11+). No rule needs a static dim or a constant index input: sizes are read in the step
// graph (Shape of the forward input) and folded by the plan for each concrete shape.

#include "graph/grad/grad_rules.h"
#include "graph/grad/grad_util.h"
#include "graph/op_registry.h"
#include "graph/ops/shape_util.h"

namespace ot {

namespace {

// Slice: SliceGrad(dY, Shape(X), starts, ends, axes, steps) -- the forward's own index inputs (attributes before
// opset 10 become constants), so X's dims and the indices may be known only when the step runs (a positional table
// sliced by the input's length); the plan folds them for each concrete shape.
void SliceGradRule(GradContext& c) {
  const Node& n = c.node();
  grad::Rank(c, c.X(0), "X");
  std::vector<Value*> in{c.dY(0), c.Op("Shape", {c.X(0)})};
  if (n.opset >= 10) {
    for (int i = 1; i <= 4; ++i) in.push_back(n.has_input(i) ? n.inputs[i] : nullptr);
    while (in.back() == nullptr) in.pop_back();
  } else {
    in.push_back(c.Ints(n.attr_ints("starts")));
    in.push_back(c.Ints(n.attr_ints("ends")));
    if (n.has_attr("axes")) in.push_back(c.Ints(n.attr_ints("axes")));
  }
  c.SetGrad(0, c.Op("SliceGrad", in, {}, kInternalDomain));
}

void GatherElementsGrad(GradContext& c) {
  const auto axis = Attribute::Int(c.node().attr_int("axis", 0));
  c.SetGrad(0, c.Op("ScatterElements", {grad::ZerosLike(c, c.X(0)), c.X(1), c.dY(0)},
                    {{"axis", axis}, {"reduction", Attribute::String("add")}}));
}

void GatherNDGrad(GradContext& c) {
  if (c.node().attr_int("batch_dims", 0) != 0) c.Fail("GatherND with batch_dims != 0 has no gradient rule");
  c.SetGrad(
      0, c.Op("ScatterND", {grad::ZerosLike(c, c.X(0)), c.X(1), c.dY(0)}, {{"reduction", Attribute::String("add")}}));
}

void ScatterElementsGrad(GradContext& c) {
  const std::string red = c.node().attr_string("reduction", "none");
  if (red != "none" && red != "add") c.Fail("ScatterElements with reduction '" + red + "' has no gradient rule");
  const auto axis = Attribute::Int(c.node().attr_int("axis", 0));
  if (c.needs_grad(0)) {
    if (red == "add")
      c.SetGrad(0, c.dY(0));
    else
      c.SetGrad(0, c.Op("ScatterElements", {c.dY(0), c.X(1), grad::ZerosLike(c, c.X(2))}, {{"axis", axis}}));
  }
  if (c.needs_grad(2)) c.SetGrad(2, c.Op("GatherElements", {c.dY(0), c.X(1)}, {{"axis", axis}}));
}

// ScatterND: as ScatterElements, with GatherND for the updates' gradient.
void ScatterNDGrad(GradContext& c) {
  const std::string red = c.node().attr_string("reduction", "none");
  if (red != "none" && red != "add") c.Fail("ScatterND with reduction '" + red + "' has no gradient rule");
  if (c.needs_grad(0))
    c.SetGrad(0, red == "add" ? c.dY(0) : c.Op("ScatterND", {c.dY(0), c.X(1), grad::ZerosLike(c, c.X(2))}));
  if (c.needs_grad(2)) c.SetGrad(2, c.Op("GatherND", {c.dY(0), c.X(1)}));
}

// Trilu: the same triangle of dY.
void TriluGrad(GradContext& c) {
  std::vector<Value*> in{c.dY(0)};
  if (c.node().has_input(1)) in.push_back(c.X(1));
  c.SetGrad(0, c.Op("Trilu", in, {{"upper", Attribute::Int(c.node().attr_int("upper", 1))}}));
}

// TopK: dValues scattered to the positions in Indices (distinct within each slice, so no reduction is needed).
void TopKGrad(GradContext& c) {
  if (!c.node().has_output(1)) c.Fail("TopK needs its Indices output for the gradient");
  if (c.node().opset < 9) c.Fail("TopK's gradient needs opset 9 or later (Scatter)");
  const auto axis = Attribute::Int(c.node().attr_int("axis", -1));
  c.SetGrad(0, c.Op(c.node().opset >= 11 ? "ScatterElements" : "Scatter", {grad::ZerosLike(c, c.X(0)), c.Y(1), c.dY(0)},
                    {{"axis", axis}}));
}

// CumSum: dX is the cumulative sum of dY in the other direction (same exclusive).
void CumSumGrad(GradContext& c) {
  const Node& n = c.node();
  c.SetGrad(0, c.Op("CumSum", {c.dY(0), c.X(1)},
                    {{"exclusive", Attribute::Int(n.attr_int("exclusive", 0))},
                     {"reverse", Attribute::Int(n.attr_int("reverse", 0) ? 0 : 1)}}));
}

// DepthToSpace / SpaceToDepth: the forward's Reshape -> Transpose -> Reshape run backwards. `mid` is the
// transposed 6-D shape (0 copies N), `inv` the inverse of the forward's permutation.
void SpaceDepthGrad(GradContext& c, bool to_space) {
  const Node& n = c.node();
  if (grad::Rank(c, c.X(0), "X") != 4) c.Fail("X must have rank 4");
  const int64_t b = n.attr_int("blocksize", 0);
  if (b <= 0) c.Fail("blocksize must be positive");
  // X's C, H, W: static, or read in the step graph.
  const grad::SizeElem zero{0, nullptr}, bk{b, nullptr}, ch = grad::DimOf(c, c.X(0), 1), h = grad::DimOf(c, c.X(0), 2),
                                                         w = grad::DimOf(c, c.X(0), 3);
  std::vector<grad::SizeElem> mid;
  std::vector<int64_t> inv;
  if (to_space) {
    // DCR: [N, b, b, C/b^2, H, W] -perm [0,3,4,1,5,2]-> [N, C/b^2, H, b, W, b]; CRD: [N, C/b^2, b, b, H, W]
    // -perm [0,1,4,2,5,3]-> the same.
    mid = {zero, grad::Arith(c, "Div", ch, {b * b, nullptr}), h, bk, w, bk};
    inv = n.attr_string("mode", "DCR") == "CRD" ? std::vector<int64_t>{0, 1, 3, 5, 2, 4}
                                                : std::vector<int64_t>{0, 3, 5, 1, 2, 4};
  } else {
    // [N, C, H/b, b, W/b, b] -perm [0,3,5,1,2,4]-> [N, b, b, C, H/b, W/b].
    mid = {zero, bk, bk, ch, grad::Arith(c, "Div", h, bk), grad::Arith(c, "Div", w, bk)};
    inv = {0, 3, 4, 1, 5, 2};
  }
  Value* g = c.Op("Reshape", {c.dY(0), grad::SizesValue(c, mid)});
  g = c.Op("Transpose", {g}, {{"perm", Attribute::Ints(inv)}});
  c.SetGrad(0, c.Op("Reshape", {g, c.Op("Shape", {c.X(0)})}));
}

}  // namespace

void RegisterIndexGrads(OpRegistry& r) {
  // SliceGrad(dY, shape, starts, ends[, axes[, steps]]) -> dX of `shape`: zeros, with dY where Slice took it.
  OpSchema sg;
  sg.op_type = "SliceGrad";
  sg.domain = kInternalDomain;
  sg.value_inputs = {1, 2, 3, 4, 5};
  sg.infer = [](InferContext& ctx) {
    const DataType t = ctx.input_type(0);
    std::optional<DimsValue> target = ctx.input_dims_value(1);
    if (!target) {
      const Shape& s = ctx.input_shape(1);
      ctx.set_output(
          0, t,
          s.known_rank() && s.rank() == 1 && s[0].is_static() ? UnknownDims(static_cast<int>(s[0].value)) : Shape());
      return;
    }
    const std::vector<Dim> out = SizesOf(ctx, *target, "X's shape");
    const Shape& dy = ctx.input_shape(0);
    const int rank = static_cast<int>(out.size());
    if (dy.known_rank() && dy.rank() != rank) ctx.Fail("dY's rank differs from X's");
    // Where everything is known (always in a plan), dY must be what the slice takes.
    std::optional<shape_ops::SliceArgs> a = shape_ops::ReadSliceInputs(ctx.node, shape_ops::ValuesOf(ctx), rank, 2);
    if (a && dy.known_rank())
      for (size_t i = 0; i < a->axes.size(); ++i) {
        const int ax = static_cast<int>(a->axes[i]);
        if (!out[ax].is_static() || !dy[ax].is_static()) continue;
        const int64_t n = shape_ops::NormalizeSlice(out[ax].value, a->starts[i], a->ends[i], a->steps[i]).count;
        if (n != dy[ax].value)
          ctx.Fail("dY has " + std::to_string(dy[ax].value) + " elements along axis " + std::to_string(ax) +
                   " where the slice takes " + std::to_string(n));
      }
    ctx.set_output(0, t, Shape(out));
  };
  r.Register(sg);

  // Replaces data_grad.cc's steps-of-1 Slice rule (registered before this one).
  r.SetGrad("", "Slice", SliceGradRule, {1, 2, 3, 4});
  r.SetGrad("", "GatherElements", GatherElementsGrad, {1});
  r.SetGrad("", "GatherND", GatherNDGrad, {1});
  r.SetGrad("", "ScatterElements", ScatterElementsGrad, {1});
  r.SetGrad("", "ScatterND", ScatterNDGrad, {1});
  r.SetGrad("", "Trilu", TriluGrad, {1});
  r.SetGrad("", "TopK", TopKGrad, {1});
  r.SetGrad("", "CumSum", CumSumGrad, {1});
  r.SetGrad("", "DepthToSpace", [](GradContext& c) { SpaceDepthGrad(c, true); });
  r.SetGrad("", "SpaceToDepth", [](GradContext& c) { SpaceDepthGrad(c, false); });
}

}  // namespace ot
