// Gradient rules of ReduceSum and ReduceMean: the output gradient, with the reduced axes restored as size 1,
// broadcast back over the input (divided by the reduced count for the mean).
#include "graph/grad/grad_rules.h"
#include "graph/grad_context.h"
#include "graph/infer_util.h"
#include "graph/op_registry.h"

namespace ot {

namespace {
// Axes reduced by node c (normalised), from the attribute or the constant axes input; all axes when empty.
std::vector<int64_t> ReducedAxes(GradContext& c, int rank) {
  const Node& n = c.node();
  std::vector<int64_t> axes;
  const bool axes_input = (n.op_type == "ReduceSum" && n.opset >= 13) || n.opset >= 18;
  if (axes_input) {
    if (n.has_input(1)) {
      if (!n.inputs[1]->initializer) c.Fail("axes must be a constant");
      axes = n.inputs[1]->initializer->ToInt64Vector();
    }
  } else {
    axes = n.attr_ints("axes");
  }
  if (axes.empty()) {
    if (axes_input && n.attr_int("noop_with_empty_axes", 0)) return {};
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  }
  for (int64_t& a : axes) a = NormalizeAxis(a, rank, c.node().Describe());
  return axes;
}

Value* BroadcastBack(GradContext& c) {
  const Shape& x = c.X(0)->shape;
  if (!x.known_rank()) c.Fail("input rank must be known");
  std::vector<int64_t> axes = ReducedAxes(c, x.rank());
  Value* g = c.dY(0);
  if (!c.node().attr_int("keepdims", 1) && !axes.empty()) {
    if (c.node().opset >= 13) g = c.Op("Unsqueeze", {g, c.Ints(axes)});
    else g = c.Op("Unsqueeze", {g}, {{"axes", Attribute::Ints(axes)}});
  }
  return c.Op("Expand", {g, c.Op("Shape", {c.X(0)})});
}
}  // namespace

void RegisterReductionGrads(OpRegistry& r) {
  r.SetGrad("", "ReduceSum", [](GradContext& c) { c.SetGrad(0, BroadcastBack(c)); }, {1});
  r.SetGrad("", "ReduceMean", [](GradContext& c) {
    // count = Size(X) / Size(Y), folded when the plan is made.
    Value* count = c.Op("Div", {c.Op("Size", {c.X(0)}), c.Op("Size", {c.Y(0)})});
    Value* countf = c.Op("Cast", {count}, {{"to", Attribute::Int(static_cast<int64_t>(c.X(0)->dtype))}});
    c.SetGrad(0, c.Op("Div", {BroadcastBack(c), countf}));
  }, {1});
}

}  // namespace ot
