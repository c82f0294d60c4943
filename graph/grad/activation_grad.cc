// Gradient rules of the activations, the variadic Sum/Mean and ReduceMax/ReduceMin, written with standard ops
// (rules that need the forward output read Y rather than recomputing it). At the kinks the rules pick the side
// PyTorch's autograd picks:
//   Abs          dY * Sign(X)                               (0 at X = 0)
//   LeakyRelu    X > 0 ? dY : alpha dY                      (alpha dY at X = 0)
//   PRelu        dX = X > 0 ? dY : slope dY; dSlope = sum of (X > 0 ? 0 : dY X) over the broadcast dims
//   Elu          X > 0 ? dY : dY (Y + alpha)
//   Selu         X > 0 ? gamma dY : dY (Y + gamma alpha)
//   Celu         X > 0 ? dY : dY (Y / alpha + 1)
//   Clip         X == Y ? dY : 0                            (dY where min <= X <= max, as torch.clamp; min and max
//                                                            get no gradient; opset < 11: the same mask from
//                                                            the min/max attributes)
//   Softplus     dY * Sigmoid(X)
//   Softsign     dY / (1 + |X|)^2
//   HardSigmoid  0 < Y < 1 ? alpha dY : 0                   (strict, as torch.nn.functional.hardsigmoid)
//   HardSwish    X < -3 ? 0 : X > 3 ? dY : dY (X / 3 + 1/2)
//   Reciprocal   -dY Y^2;  Sin  dY Cos(X);  Cos  -dY Sin(X);  Tan, Sinh, Cosh, Asin, ..., Atanh, Mish likewise
//   Sign, Floor, Ceil, Round  zeros (as PyTorch)
//   Sum, Mean    dY (/ n for Mean) reduced to each input's shape
//   ThresholdedRelu  X > alpha ? dY : 0;  Shrink  |X| > lambd ? dY : 0
//   ReduceMax/ReduceMin  dY to the positions equal to the result, split evenly among ties (torch.amax/amin);
//                noop_with_empty_axes with no axes: dY.
//   ReduceSumSquare 2 X dY;  ReduceL1 Sign(X) dY;  ReduceL2 X / Y dY (0 where Y = 0);  ReduceLogSumExp
//                exp(X - Y) dY;  ReduceLogSum dY / exp(Y)  (Y, dY with the reduced axes kept, broadcast over X)
//   ReduceProd   dY times the product of the other elements (zero-safe, as torch.prod)
#include "graph/grad/grad_rules.h"
#include "graph/grad/grad_util.h"
#include "graph/op_registry.h"

namespace ot {

namespace {

using grad::CastLike;

Value* Positive(GradContext& c, Value* x) { return c.Op("Greater", {x, c.Scalar(0.0, x)}); }

Value* Zero(GradContext& c) { return c.Scalar(0.0, c.dY(0)); }

double AttrF(const GradContext& c, const char* name, double def) {
  return c.node().attr_float(name, static_cast<float>(def));
}

void ReduceExtremumGrad(GradContext& c) {
  const grad::ReduceAxes axes = grad::ReducedAxesOf(c, grad::Rank(c, c.X(0), "X"));
  if (!axes.v && axes.k.empty()) {
    c.SetGrad(0, c.dY(0));
    return;
  }
  const bool keep = c.node().attr_int("keepdims", 1) != 0;
  Value* y = keep ? c.Y(0) : grad::UnsqueezeAxes(c, c.Y(0), axes);
  Value* dy = keep ? c.dY(0) : grad::UnsqueezeAxes(c, c.dY(0), axes);
  // mask: 1 where X equals its reduction's result; count >= 1 (the result is one of the elements).
  Value* mask = CastLike(c, c.Op("Equal", {c.X(0), y}), c.X(0));
  Value* count = grad::ReduceSumAxes(c, mask, axes, /*keepdims=*/true);
  c.SetGrad(0, c.Op("Mul", {mask, c.Op("Div", {dy, count})}));
}

// ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSumExp, ReduceLogSum: dX = f(X, Y') * dY' with Y' and dY' the
// result and its gradient with the reduced axes kept (size 1), broadcast over X.
void ReduceSmoothGrad(GradContext& c) {
  const grad::ReduceAxes axes = grad::ReducedAxesOf(c, grad::Rank(c, c.X(0), "X"));
  if (!axes.v && axes.k.empty()) c.Fail("noop_with_empty_axes with no axes has no gradient rule");
  const bool keep = c.node().attr_int("keepdims", 1) != 0;
  Value* y = keep ? c.Y(0) : grad::UnsqueezeAxes(c, c.Y(0), axes);
  Value* dy = keep ? c.dY(0) : grad::UnsqueezeAxes(c, c.dY(0), axes);
  Value* x = c.X(0);
  const std::string& op = c.node().op_type;
  Value* g;
  if (op == "ReduceSumSquare") {
    g = c.Op("Mul", {c.Op("Mul", {x, c.Scalar(2.0, x)}), dy});
  } else if (op == "ReduceL1") {
    g = c.Op("Mul", {c.Op("Sign", {x}), dy});
  } else if (op == "ReduceL2") {
    // X / Y; 0 where the norm is 0 (torch.linalg.vector_norm's subgradient).
    Value* q = c.Op("Mul", {c.Op("Div", {x, y}), dy});
    g = c.Op("Where", {c.Op("Equal", {y, c.Scalar(0.0, y)}), c.Scalar(0.0, x), q});
  } else if (op == "ReduceLogSumExp") {
    g = c.Op("Mul", {c.Op("Exp", {c.Op("Sub", {x, y})}), dy});
  } else {  // ReduceLogSum: d log(sum X) = 1 / sum X = exp(-Y)
    g = c.Op("Div", {dy, c.Op("Exp", {y})});
  }
  c.SetGrad(0, c.Op("Expand", {g, c.Op("Shape", {x})}));
}

// ReduceProd: dX_i = dY * (product of the others), zero-safe: with no zero in the reduced group that is Y / X_i;
// with one zero, the product of the non-zeros at the zero and 0 elsewhere; with two or more, 0 everywhere.
void ReduceProdGrad(GradContext& c) {
  const grad::ReduceAxes axes = grad::ReducedAxesOf(c, grad::Rank(c, c.X(0), "X"));
  if (!axes.v && axes.k.empty()) c.Fail("noop_with_empty_axes with no axes has no gradient rule");
  const bool keep = c.node().attr_int("keepdims", 1) != 0;
  Value* dy = keep ? c.dY(0) : grad::UnsqueezeAxes(c, c.dY(0), axes);
  Value* x = c.X(0);
  Value* one = c.Scalar(1.0, x);
  Value* zero = c.Scalar(0.0, x);
  Value* is_zero = c.Op("Equal", {x, zero});
  Value* nz = c.Op("Where", {is_zero, one, x});
  Value* prod_nz = c.node().opset >= 18 ? c.Op("ReduceProd", {nz, grad::AxesValue(c, axes)})
                                        : c.Op("ReduceProd", {nz}, {{"axes", Attribute::Ints(axes.k)}});
  Value* zeros = grad::ReduceSumAxes(c, CastLike(c, is_zero, x), axes, /*keepdims=*/true);
  Value* one_zero_here = c.Op("Where", {c.Op("And", {c.Op("Equal", {zeros, one}), is_zero}), prod_nz, zero});
  Value* others = c.Op("Where", {c.Op("Equal", {zeros, zero}), c.Op("Div", {prod_nz, nz}), one_zero_here});
  c.SetGrad(0, c.Op("Mul", {others, dy}));
}

void VariadicGrad(GradContext& c, bool mean) {
  const int n = static_cast<int>(c.node().inputs.size());
  Value* g = mean ? c.Op("Div", {c.dY(0), c.Scalar(n, c.dY(0))}) : c.dY(0);
  for (int i = 0; i < n; ++i)
    if (c.needs_grad(i)) c.SetGrad(i, c.ReduceToShape(g, c.X(i)));
}

}  // namespace

void RegisterActivationGrads(OpRegistry& r) {
  r.SetGrad("", "Abs", [](GradContext& c) { c.SetGrad(0, c.Op("Mul", {c.dY(0), c.Op("Sign", {c.X(0)})})); });
  r.SetGrad("", "LeakyRelu", [](GradContext& c) {
    Value* neg = c.Op("Mul", {c.dY(0), c.Scalar(AttrF(c, "alpha", 0.01), c.dY(0))});
    c.SetGrad(0, c.Op("Where", {Positive(c, c.X(0)), c.dY(0), neg}));
  });
  r.SetGrad("", "PRelu", [](GradContext& c) {
    Value* pos = Positive(c, c.X(0));
    if (c.needs_grad(0))
      c.SetGrad(0, c.ReduceToShape(c.Op("Where", {pos, c.dY(0), c.Op("Mul", {c.dY(0), c.X(1)})}), c.X(0)));
    if (c.needs_grad(1))
      c.SetGrad(1, c.ReduceToShape(c.Op("Where", {pos, Zero(c), c.Op("Mul", {c.dY(0), c.X(0)})}), c.X(1)));
  });
  r.SetGrad("", "Elu", [](GradContext& c) {
    Value* d = c.Op("Add", {c.Y(0), c.Scalar(AttrF(c, "alpha", 1.0), c.Y(0))});
    c.SetGrad(0, c.Op("Where", {Positive(c, c.X(0)), c.dY(0), c.Op("Mul", {c.dY(0), d})}));
  });
  r.SetGrad("", "Selu", [](GradContext& c) {
    const double alpha = AttrF(c, "alpha", 1.67326319217681884765625);
    const double gamma = AttrF(c, "gamma", 1.05070102214813232421875);
    Value* d = c.Op("Add", {c.Y(0), c.Scalar(gamma * alpha, c.Y(0))});
    c.SetGrad(0, c.Op("Where", {Positive(c, c.X(0)), c.Op("Mul", {c.dY(0), c.Scalar(gamma, c.dY(0))}),
                                c.Op("Mul", {c.dY(0), d})}));
  });
  r.SetGrad("", "Celu", [](GradContext& c) {
    const double alpha = AttrF(c, "alpha", 1.0);
    Value* d = c.Op("Add", {c.Op("Div", {c.Y(0), c.Scalar(alpha, c.Y(0))}), c.Scalar(1.0, c.Y(0))});
    c.SetGrad(0, c.Op("Where", {Positive(c, c.X(0)), c.dY(0), c.Op("Mul", {c.dY(0), d})}));
  });
  r.SetGrad("", "Clip",
            [](GradContext& c) {
              if (c.node().opset >= 11) {
                c.SetGrad(0, c.Op("Where", {c.Op("Equal", {c.X(0), c.Y(0)}), c.dY(0), Zero(c)}));
                return;
              }
              // Opset 6-10 (min/max attributes): ops of those opsets only (no Where before 9, no float Equal before
              // 11).
              const double lo = AttrF(c, "min", -3.402823466e38), hi = AttrF(c, "max", 3.402823466e38);
              Value* out = c.Op("Or", {c.Op("Less", {c.X(0), c.Scalar(lo, c.X(0))}),
                                       c.Op("Greater", {c.X(0), c.Scalar(hi, c.X(0))})});
              c.SetGrad(0, c.Op("Mul", {c.dY(0), CastLike(c, c.Op("Not", {out}), c.dY(0))}));
            },
            {1, 2});
  r.SetGrad("", "Softplus", [](GradContext& c) { c.SetGrad(0, c.Op("Mul", {c.dY(0), c.Op("Sigmoid", {c.X(0)})})); });
  r.SetGrad("", "Softsign", [](GradContext& c) {
    Value* d = c.Op("Add", {c.Scalar(1.0, c.X(0)), c.Op("Abs", {c.X(0)})});
    c.SetGrad(0, c.Op("Div", {c.dY(0), c.Op("Mul", {d, d})}));
  });
  r.SetGrad("", "HardSigmoid", [](GradContext& c) {
    Value* inside = c.Op("And", {Positive(c, c.Y(0)), c.Op("Less", {c.Y(0), c.Scalar(1.0, c.Y(0))})});
    Value* g = c.Op("Mul", {c.dY(0), c.Scalar(AttrF(c, "alpha", 0.2), c.dY(0))});
    c.SetGrad(0, c.Op("Where", {inside, g, Zero(c)}));
  });
  r.SetGrad("", "HardSwish", [](GradContext& c) {
    Value* x = c.X(0);
    Value* mid = c.Op("Add", {c.Op("Div", {x, c.Scalar(3.0, x)}), c.Scalar(0.5, x)});
    Value* upper = c.Op("Where", {c.Op("Greater", {x, c.Scalar(3.0, x)}), c.dY(0), c.Op("Mul", {c.dY(0), mid})});
    c.SetGrad(0, c.Op("Where", {c.Op("Less", {x, c.Scalar(-3.0, x)}), Zero(c), upper}));
  });
  r.SetGrad("", "Reciprocal", [](GradContext& c) {
    c.SetGrad(0, c.Op("Neg", {c.Op("Mul", {c.dY(0), c.Op("Mul", {c.Y(0), c.Y(0)})})}));
  });
  r.SetGrad("", "Sin", [](GradContext& c) { c.SetGrad(0, c.Op("Mul", {c.dY(0), c.Op("Cos", {c.X(0)})})); });
  r.SetGrad("", "Cos", [](GradContext& c) {
    c.SetGrad(0, c.Op("Neg", {c.Op("Mul", {c.dY(0), c.Op("Sin", {c.X(0)})})}));
  });
  r.SetGrad("", "Tan", [](GradContext& c) {  // dY (1 + Y^2)
    Value* d = c.Op("Add", {c.Scalar(1.0, c.Y(0)), c.Op("Mul", {c.Y(0), c.Y(0)})});
    c.SetGrad(0, c.Op("Mul", {c.dY(0), d}));
  });
  r.SetGrad("", "Sinh", [](GradContext& c) { c.SetGrad(0, c.Op("Mul", {c.dY(0), c.Op("Cosh", {c.X(0)})})); });
  r.SetGrad("", "Cosh", [](GradContext& c) { c.SetGrad(0, c.Op("Mul", {c.dY(0), c.Op("Sinh", {c.X(0)})})); });
  // d asin = 1 / sqrt(1 - x^2), d acos = -that, d atan = 1 / (1 + x^2), d asinh = 1 / sqrt(x^2 + 1),
  // d acosh = 1 / sqrt(x^2 - 1), d atanh = 1 / (1 - x^2).
  auto inverse_trig = [](double sq_sign, double one, bool root, bool negate) {
    return [=](GradContext& c) {
      Value* x2 = c.Op("Mul", {c.X(0), c.X(0)});
      if (sq_sign < 0) x2 = c.Op("Neg", {x2});
      Value* d = c.Op("Add", {x2, c.Scalar(one, c.X(0))});
      if (root) d = c.Op("Sqrt", {d});
      Value* g = c.Op("Div", {c.dY(0), d});
      c.SetGrad(0, negate ? c.Op("Neg", {g}) : g);
    };
  };
  r.SetGrad("", "Asin", inverse_trig(-1, 1, true, false));
  r.SetGrad("", "Acos", inverse_trig(-1, 1, true, true));
  r.SetGrad("", "Atan", inverse_trig(1, 1, false, false));
  r.SetGrad("", "Asinh", inverse_trig(1, 1, true, false));
  r.SetGrad("", "Acosh", inverse_trig(1, -1, true, false));
  r.SetGrad("", "Atanh", inverse_trig(-1, 1, false, false));
  // Mish: Y = X tanh(softplus(X)); dY/dX = t + X sigmoid(X) (1 - t^2) with t = tanh(softplus(X)).
  r.SetGrad("", "Mish", [](GradContext& c) {
    Value* x = c.X(0);
    Value* t = c.Op("Tanh", {c.Op("Softplus", {x})});
    Value* one_minus = c.Op("Sub", {c.Scalar(1.0, x), c.Op("Mul", {t, t})});
    Value* d = c.Op("Add", {t, c.Op("Mul", {c.Op("Mul", {x, c.Op("Sigmoid", {x})}), one_minus})});
    c.SetGrad(0, c.Op("Mul", {c.dY(0), d}));
  });
  // Piecewise-constant ops: a zero gradient (as PyTorch's autograd gives them).
  for (const char* op : {"Sign", "Floor", "Ceil", "Round"})
    r.SetGrad("", op, [](GradContext& c) { c.SetGrad(0, grad::ZerosLike(c, c.X(0))); });
  r.SetGrad("", "Sum", [](GradContext& c) { VariadicGrad(c, false); });
  r.SetGrad("", "Mean", [](GradContext& c) { VariadicGrad(c, true); });
  r.SetGrad("", "ThresholdedRelu", [](GradContext& c) {
    Value* above = c.Op("Greater", {c.X(0), c.Scalar(AttrF(c, "alpha", 1.0), c.X(0))});
    c.SetGrad(0, c.Op("Where", {above, c.dY(0), Zero(c)}));
  });
  r.SetGrad("", "Shrink", [](GradContext& c) {
    const double l = AttrF(c, "lambd", 0.5);
    Value* out =
        c.Op("Or", {c.Op("Less", {c.X(0), c.Scalar(-l, c.X(0))}), c.Op("Greater", {c.X(0), c.Scalar(l, c.X(0))})});
    c.SetGrad(0, c.Op("Where", {out, c.dY(0), Zero(c)}));
  });
  for (const char* op : {"ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceLogSum"})
    r.SetGrad("", op, ReduceSmoothGrad, {1});
  r.SetGrad("", "ReduceProd", ReduceProdGrad, {1});
  r.SetGrad("", "ReduceMax", ReduceExtremumGrad, {1});
  r.SetGrad("", "ReduceMin", ReduceExtremumGrad, {1});
}

}  // namespace ot
