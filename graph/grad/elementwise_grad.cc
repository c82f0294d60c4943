// Gradient rules of elementwise ops. Broadcasting ops reduce each input's gradient back to that input's shape
// (ReduceToShape); rules that need the forward output read Y rather than recomputing it.
#include "graph/grad/grad_rules.h"
#include "graph/grad_context.h"
#include "graph/op_registry.h"

namespace ot {

void RegisterElementwiseGrads(OpRegistry& r) {
  r.SetGrad("", "Add", [](GradContext& c) {
    if (c.needs_grad(0)) c.SetGrad(0, c.ReduceToShape(c.dY(0), c.X(0)));
    if (c.needs_grad(1)) c.SetGrad(1, c.ReduceToShape(c.dY(0), c.X(1)));
  });
  r.SetGrad("", "Sub", [](GradContext& c) {
    if (c.needs_grad(0)) c.SetGrad(0, c.ReduceToShape(c.dY(0), c.X(0)));
    if (c.needs_grad(1)) c.SetGrad(1, c.ReduceToShape(c.Op("Neg", {c.dY(0)}), c.X(1)));
  });
  r.SetGrad("", "Mul", [](GradContext& c) {
    if (c.needs_grad(0)) c.SetGrad(0, c.ReduceToShape(c.Op("Mul", {c.dY(0), c.X(1)}), c.X(0)));
    if (c.needs_grad(1)) c.SetGrad(1, c.ReduceToShape(c.Op("Mul", {c.dY(0), c.X(0)}), c.X(1)));
  });
  // Y = A / B: dA = dY / B, dB = -dY * Y / B.
  r.SetGrad("", "Div", [](GradContext& c) {
    if (c.needs_grad(0)) c.SetGrad(0, c.ReduceToShape(c.Op("Div", {c.dY(0), c.X(1)}), c.X(0)));
    if (c.needs_grad(1)) {
      Value* t = c.Op("Mul", {c.dY(0), c.Op("Div", {c.Y(0), c.X(1)})});
      c.SetGrad(1, c.ReduceToShape(c.Op("Neg", {t}), c.X(1)));
    }
  });
  r.SetGrad("", "Neg", [](GradContext& c) { c.SetGrad(0, c.Op("Neg", {c.dY(0)})); });
  r.SetGrad("", "Identity", [](GradContext& c) { c.SetGrad(0, c.dY(0)); });
  r.SetGrad("", "Relu", [](GradContext& c) { c.SetGrad(0, c.Op("ReluGrad", {c.dY(0), c.Y(0)}, {}, kInternalDomain)); });
  // dX = dY * Y * (1 - Y)
  r.SetGrad("", "Sigmoid", [](GradContext& c) {
    Value* one_minus = c.Op("Sub", {c.Scalar(1.0, c.Y(0)), c.Y(0)});
    c.SetGrad(0, c.Op("Mul", {c.dY(0), c.Op("Mul", {c.Y(0), one_minus})}));
  });
  // dX = dY * (1 - Y^2)
  r.SetGrad("", "Tanh", [](GradContext& c) {
    Value* one_minus = c.Op("Sub", {c.Scalar(1.0, c.Y(0)), c.Op("Mul", {c.Y(0), c.Y(0)})});
    c.SetGrad(0, c.Op("Mul", {c.dY(0), one_minus}));
  });
  r.SetGrad("", "Exp", [](GradContext& c) { c.SetGrad(0, c.Op("Mul", {c.dY(0), c.Y(0)})); });
  r.SetGrad("", "Log", [](GradContext& c) { c.SetGrad(0, c.Op("Div", {c.dY(0), c.X(0)})); });
  // dX = dY / (2 Y)
  r.SetGrad("", "Sqrt", [](GradContext& c) {
    c.SetGrad(0, c.Op("Div", {c.dY(0), c.Op("Mul", {c.Y(0), c.Scalar(2.0, c.Y(0))})}));
  });
}

}  // namespace ot
