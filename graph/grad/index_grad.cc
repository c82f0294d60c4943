// Gradient rules of Slice (any steps), the element-indexed ops, Trilu, TopK, CumSum and DepthToSpace/
// SpaceToDepth, with standard ops only:
//   Slice            dY put back where the slice took it, zeros elsewhere. Per sliced axis with step s and n
//                    elements taken: a negative step is undone by reversing dY along the axis (Slice with step
//                    -1); |s| > 1 spreads the n elements |s| apart ([n] -> [n, 1] -> Pad to [n, |s|] -> [n |s|]
//                    -> the first (n - 1)|s| + 1); one Pad at the end then offsets every axis to the first
//                    element taken. Starts/ends are clamped as the forward clamps them (ONNX Slice rules).
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
// it runs these ops at (11+). Rules need static X dims (Slice) and constant starts/ends/axes/steps, which they
// are after the exporter's shape arithmetic is folded.
#include <algorithm>
#include <limits>

#include "graph/grad/grad_rules.h"
#include "graph/grad/grad_util.h"
#include "graph/op_registry.h"

namespace ot {

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Slice with inputs (opset >= 10; the only opsets whose Slice has steps).
Value* SliceSteps(GradContext& c, Value* v, int64_t start, int64_t end, int64_t axis, int64_t step) {
  return c.Op("Slice", {v, c.Ints({start}), c.Ints({end}), c.Ints({axis}), c.Ints({step})});
}

void SliceGrad(GradContext& c) {
  const Node& n = c.node();
  const std::vector<int64_t> x = grad::StaticDims(c, c.X(0), "X");
  const int rank = static_cast<int>(x.size());
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (n.opset >= 10) {
    starts = grad::ConstInts(n.inputs[1]);
    ends = grad::ConstInts(n.inputs[2]);
    if (n.has_input(3)) axes = grad::ConstInts(n.inputs[3]);
    if (n.has_input(4)) steps = grad::ConstInts(n.inputs[4]);
    if (!starts || !ends || (n.has_input(3) && !axes) || (n.has_input(4) && !steps))
      c.Fail("starts, ends, axes and steps must be constants");
  } else {
    starts = n.attr_ints("starts");
    ends = n.attr_ints("ends");
    if (n.attr("axes")) axes = n.attr_ints("axes");
  }
  if (!axes) {
    axes.emplace();
    for (size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<int64_t>(i));
  }
  if (ends->size() != starts->size() || axes->size() != starts->size() || (steps && steps->size() != starts->size()))
    c.Fail("starts, ends, axes and steps must have the same length");

  struct Taken {
    int axis;
    int64_t first;  // index in X of the first element taken
    int64_t count;  // elements taken
    int64_t step;
  };
  std::vector<Taken> taken;
  std::vector<int64_t> cur = x;  // dims of the gradient being built; starts as Y's
  for (size_t i = 0; i < axes->size(); ++i) {
    const int a = NormalizeAxis((*axes)[i], rank, n.Describe());
    const int64_t d = x[a];
    const int64_t step = steps ? (*steps)[i] : 1;
    if (step == 0) c.Fail("a step of 0 is invalid");
    int64_t s = (*starts)[i], e = (*ends)[i];
    // Clamp as ONNX Slice does (saturating: starts/ends may be INT64_MIN/MAX).
    if (s < 0) s = s < -d ? -1 - d : s + d;
    if (e < 0) e = e < -d ? -1 - d : e + d;
    int64_t count = 0;
    if (d == 0) {
      // nothing taken
    } else if (step > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      count = e > s ? CeilDiv(e - s, step) : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      count = s > e ? CeilDiv(s - e, -step) : 0;
    }
    cur[a] = count;
    taken.push_back({a, count > 0 ? std::min(s, s + (count - 1) * step) : 0, count, step});
  }

  Value* g = c.dY(0);
  std::vector<int64_t> pads(2 * rank, 0);
  for (const Taken& t : taken) {
    const int a = t.axis;
    const int64_t gap = t.step < 0 ? -t.step : t.step;
    int64_t len = 0;
    if (t.count > 0) {
      if (t.step < 0 && t.count > 1) g = SliceSteps(c, g, -1, std::numeric_limits<int64_t>::min(), a, -1);
      len = (t.count - 1) * gap + 1;
      if (gap > 1 && t.count > 1) {
        std::vector<int64_t> view(cur.begin(), cur.end());
        view.insert(view.begin() + a + 1, 1);
        g = c.Op("Reshape", {g, c.Ints(view)});
        std::vector<int64_t> spread(2 * (rank + 1), 0);
        spread[(rank + 1) + a + 1] = gap - 1;  // zeros after each element
        g = grad::PadZeros(c, g, spread);
        std::vector<int64_t> merged = cur;
        merged[a] = t.count * gap;
        g = c.Op("Reshape", {g, c.Ints(merged)});
        g = SliceSteps(c, g, 0, len, a, 1);
      }
    }
    cur[a] = len;
    pads[a] = t.first;
    pads[rank + a] = x[a] - t.first - len;
  }
  if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; })) g = grad::PadZeros(c, g, pads);
  c.SetGrad(0, g);
}

void GatherElementsGrad(GradContext& c) {
  const auto axis = Attribute::Int(c.node().attr_int("axis", 0));
  c.SetGrad(0, c.Op("ScatterElements", {grad::ZerosLike(c, c.X(0)), c.X(1), c.dY(0)},
                    {{"axis", axis}, {"reduction", Attribute::String("add")}}));
}

void GatherNDGrad(GradContext& c) {
  if (c.node().attr_int("batch_dims", 0) != 0) c.Fail("GatherND with batch_dims != 0 has no gradient rule");
  c.SetGrad(0, c.Op("ScatterND", {grad::ZerosLike(c, c.X(0)), c.X(1), c.dY(0)},
                    {{"reduction", Attribute::String("add")}}));
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
  c.SetGrad(0, c.Op(c.node().opset >= 11 ? "ScatterElements" : "Scatter",
                    {grad::ZerosLike(c, c.X(0)), c.Y(1), c.dY(0)}, {{"axis", axis}}));
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
  const Shape& xs = c.X(0)->shape;
  for (int i = 1; i < 4; ++i)
    if (!xs[i].is_static()) c.Fail("X's channel and spatial dims must be static");
  const int64_t b = n.attr_int("blocksize", 0), ch = xs[1].value, h = xs[2].value, w = xs[3].value;
  if (b <= 0) c.Fail("blocksize must be positive");
  std::vector<int64_t> mid, inv;
  if (to_space) {
    // DCR: [N, b, b, C/b^2, H, W] -perm [0,3,4,1,5,2]-> [N, C/b^2, H, b, W, b]; CRD: [N, C/b^2, b, b, H, W]
    // -perm [0,1,4,2,5,3]-> the same.
    mid = {0, ch / (b * b), h, b, w, b};
    inv = n.attr_string("mode", "DCR") == "CRD" ? std::vector<int64_t>{0, 1, 3, 5, 2, 4}
                                                : std::vector<int64_t>{0, 3, 5, 1, 2, 4};
  } else {
    // [N, C, H/b, b, W/b, b] -perm [0,3,5,1,2,4]-> [N, b, b, C, H/b, W/b].
    mid = {0, b, b, ch, h / b, w / b};
    inv = {0, 3, 4, 1, 5, 2};
  }
  Value* g = c.Op("Reshape", {c.dY(0), c.Ints(mid)});
  g = c.Op("Transpose", {g}, {{"perm", Attribute::Ints(inv)}});
  c.SetGrad(0, c.Op("Reshape", {g, c.Op("Shape", {c.X(0)})}));
}

}  // namespace

void RegisterIndexGrads(OpRegistry& r) {
  // Replaces data_grad.cc's steps-of-1 Slice rule (registered before this one).
  r.SetGrad("", "Slice", SliceGrad, {1, 2, 3, 4});
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
