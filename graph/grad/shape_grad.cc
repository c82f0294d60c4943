// Gradient rules of data-movement ops: the gradient moves back the way the data came.
#include "graph/grad/grad_rules.h"
#include "graph/grad_context.h"
#include "graph/op_registry.h"

namespace ot {

namespace {
// Ops that only reinterpret the shape: dX = Reshape(dY, Shape(X)).
void ReshapeBack(GradContext& c) { c.SetGrad(0, c.Op("Reshape", {c.dY(0), c.Op("Shape", {c.X(0)})})); }
}  // namespace

void RegisterShapeGrads(OpRegistry& r) {
  r.SetGrad("", "Reshape", ReshapeBack, {1});
  r.SetGrad("", "Flatten", ReshapeBack);
  r.SetGrad("", "Squeeze", ReshapeBack, {1});
  r.SetGrad("", "Unsqueeze", ReshapeBack, {1});
  r.SetGrad("", "Transpose", [](GradContext& c) {
    const Shape& x = c.X(0)->shape;
    if (!x.known_rank()) c.Fail("input rank must be known");
    std::vector<int64_t> perm = c.node().attr_ints("perm");
    if (perm.empty())
      for (int i = x.rank() - 1; i >= 0; --i) perm.push_back(i);
    std::vector<int64_t> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
    c.SetGrad(0, c.Op("Transpose", {c.dY(0)}, {{"perm", Attribute::Ints(inv)}}));
  });
}

}  // namespace ot
