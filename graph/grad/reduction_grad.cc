// Gradient rules of ReduceSum and ReduceMean: the output gradient, with the reduced axes restored as size 1,
// broadcast back over the input (divided by the reduced count for the mean).
#include "graph/grad/grad_rules.h"
#include "graph/grad/grad_util.h"
#include "graph/grad_context.h"
#include "graph/infer_util.h"
#include "graph/op_registry.h"

namespace ot {

namespace {
Value* BroadcastBack(GradContext& c) {
  const grad::ReduceAxes axes = grad::ReducedAxesOf(c, grad::Rank(c, c.X(0), "X"));
  Value* g = c.dY(0);
  if (!c.node().attr_int("keepdims", 1) && (axes.v || !axes.k.empty())) g = grad::UnsqueezeAxes(c, g, axes);
  return c.Op("Expand", {g, c.Op("Shape", {c.X(0)})});
}
}  // namespace

void RegisterReductionGrads(OpRegistry& r) {
  r.SetGrad("", "ReduceSum", [](GradContext& c) { c.SetGrad(0, BroadcastBack(c)); }, {1});
  r.SetGrad("", "ReduceMean",
            [](GradContext& c) {
              // count = Size(X) / Size(Y), folded when the plan is made.
              Value* count = c.Op("Div", {c.Op("Size", {c.X(0)}), c.Op("Size", {c.Y(0)})});
              Value* countf = c.Op("Cast", {count}, {{"to", Attribute::Int(static_cast<int64_t>(c.X(0)->dtype))}});
              c.SetGrad(0, c.Op("Div", {BroadcastBack(c), countf}));
            },
            {1});
}

}  // namespace ot
