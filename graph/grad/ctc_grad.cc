// Gradient rule of ai.onnxtrain.CTCLoss and the schema of the op it emits (CPU kernel in executor/kernels/ctc.cc
// over cpu_ops/ctc.h CtcLossGrad, which recomputes the forward and backward variables from the logits):
//   CTCLossGrad(dLoss, logits, labels, logit_lengths, label_lengths) {CTCLoss's attributes} -> dLogits
// dLogits = dLoss * w_b * (softmax(logits) - occupancy) per sample b (w_b = 1 / max(label length, 1) / batch for
// mean, 1 for sum), zero past each sample's frames. The labels and lengths get no gradient.
#include "graph/grad/grad_rules.h"
#include "graph/grad_context.h"
#include "graph/op_registry.h"

namespace ot {

void RegisterCtcGrads(OpRegistry& r) {
  OpSchema s;
  s.op_type = "CTCLossGrad";
  s.domain = kInternalDomain;
  s.infer = [](InferContext& ctx) {
    ctx.RequireArity(5, 5, 1);
    ctx.set_output(0, ctx.input_type(1), ctx.Require(1));
  };
  r.Register(s);
  r.SetGrad(kInternalDomain, "CTCLoss",
            [](GradContext& c) {
              const Node& n = c.node();
              c.SetGrad(0, c.Op("CTCLossGrad", {c.dY(0), c.X(0), c.X(1), c.X(2), c.X(3)}, n.attrs, kInternalDomain));
            },
            {1, 2, 3});
}

}  // namespace ot
