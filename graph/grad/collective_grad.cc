// Gradient rule of ai.onnxtrain.AllReduceSum (graph/ops/collective.cc): y = sum over the ranks of x, so a loss summed
// over the ranks has dx = sum over the ranks of dy -- AllReduceSum again. The ordering input gets no gradient.
#include "graph/grad/grad_rules.h"
#include "graph/grad_context.h"
#include "graph/op_registry.h"

namespace ot {

void RegisterCollectiveGrads(OpRegistry& r) {
  r.SetGrad(kInternalDomain, "AllReduceSum",
            [](GradContext& c) {
              c.SetGrad(0, c.Op("AllReduceSum", {c.dY(0)}, {{"world", *c.node().attr("world")}}, kInternalDomain));
            },
            {1});
}

}  // namespace ot
