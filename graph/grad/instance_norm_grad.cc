// Gradient rules of InstanceNormalization, MeanVarianceNormalization and LpNormalization, with standard ops.
// InstanceNormalization, per (n, c) plane over the spatial axes S:
//   mean = E_S[X], xc = X - mean, var = E_S[xc^2] (biased, as the forward), inv = 1 / sqrt(var + epsilon),
//   xhat = xc * inv, Y = scale * xhat + B
//   dxhat = dY * scale
//   dX     = inv * (dxhat - E_S[dxhat] - xhat * E_S[dxhat * xhat])
//   dScale = sum over N and S of dY * xhat;   dB = sum over N and S of dY
// which is BatchNormalization's training gradient with each (n, c) plane a channel of its own: X and dY viewed as
// [1, N*C, S], the scale repeated per image. So the rule is one BatchNormGrad (its kernel: the plane's statistics
// recomputed from X and both sums in one pass, dX in a second) on that view, and dScale, dB its per-plane results
// summed over N. (Before, ~15 standard ops, which re-read X and dY in five passes: PoolFormer's GroupNorm gradient
// took 3x PyTorch's.)
//
// LpNormalization, Y = X / ||X||_p along `axis` (p = 2 or 1), s = sum along the axis of dY * Y:
//   dX = (dY - Y s) / ||X||_2   or   (dY - Sign(X) s) / ||X||_1;   0 where the norm is 0 (the forward gives 0)
#include "graph/grad/grad_rules.h"
#include "graph/grad/grad_util.h"
#include "graph/op_registry.h"

namespace ot {

namespace {

// ReduceMean(v, axes) {keepdims = 1}; axes as an input from opset 18.
Value* MeanAxes(GradContext& c, Value* v, const std::vector<int64_t>& axes) {
  if (c.node().opset >= 18) return c.Op("ReduceMean", {v, c.Ints(axes)});
  return c.Op("ReduceMean", {v}, {{"axes", Attribute::Ints(axes)}});
}

void InstanceNormGrad(GradContext& c) {
  const int rank = grad::Rank(c, c.X(0), "X");
  if (rank < 3) c.Fail("X must have rank >= 3");
  Value* x = c.X(0);
  // [N, C, S...] -> [1, N*C, prod S]: Flatten at axis 2, then a leading 1.
  auto planes = [&](Value* v) {
    return grad::UnsqueezeAxes(c, c.Op("Flatten", {v}, {{"axis", Attribute::Int(2)}}), std::vector<int64_t>{0});
  };
  Value* shape = c.Op("Shape", {x});
  Value* nc = c.node().opset >= 10  // [N, C]
                  ? c.Op("Slice", {shape, c.Ints({0}), c.Ints({2})})
                  : c.Op("Slice", {shape}, {{"starts", Attribute::Ints({0})}, {"ends", Attribute::Ints({2})}});
  Value* scale_nc = c.Op("Expand", {c.X(1), nc});  // scale per plane, [N, C]
  auto outs =
      c.OpN("BatchNormGrad", {planes(c.dY(0)), planes(x), c.Op("Reshape", {scale_nc, c.Ints({-1})})}, 3,
            {{"epsilon", Attribute::Float(c.node().attr_float("epsilon", 1e-5f))}, {"training", Attribute::Int(1)}},
            kInternalDomain);
  if (c.needs_grad(0)) c.SetGrad(0, c.Op("Reshape", {outs[0], shape}));
  for (int i = 1; i < 3; ++i)
    if (c.needs_grad(i))
      c.SetGrad(i, grad::ReduceSumAxes(c, c.Op("Reshape", {outs[i], nc}), std::vector<int64_t>{0}, false));
}

// MeanVarianceNormalization over `axes` A: Y = xc / d, xc = X - E_A[X], sigma = sqrt(E_A[xc^2]), d = sigma + 1e-9
// (the forward's constant):  dX = (dY - E_A[dY]) / d - xc E_A[dY xc] / (d^2 sigma)  (that term 0 where sigma = 0).
void MeanVarianceNormGrad(GradContext& c) {
  const int rank = grad::Rank(c, c.X(0), "X");
  std::vector<int64_t> axes = c.node().attr_ints("axes", {0, 2, 3});
  for (int64_t& a : axes) a = NormalizeAxis(a, rank, c.node().Describe());
  Value* x = c.X(0);
  Value* dy = c.dY(0);
  Value* xc = c.Op("Sub", {x, MeanAxes(c, x, axes)});
  Value* sigma = c.Op("Sqrt", {MeanAxes(c, c.Op("Mul", {xc, xc}), axes)});
  Value* d = c.Op("Add", {sigma, c.Scalar(1e-9, x)});
  Value* safe_sigma = c.Op("Where", {c.Op("Equal", {sigma, c.Scalar(0.0, x)}), c.Scalar(1.0, x), sigma});
  Value* first = c.Op("Div", {c.Op("Sub", {dy, MeanAxes(c, dy, axes)}), d});
  Value* coef = c.Op("Div", {MeanAxes(c, c.Op("Mul", {dy, xc}), axes), c.Op("Mul", {c.Op("Mul", {d, d}), safe_sigma})});
  c.SetGrad(0, c.Op("Sub", {first, c.Op("Mul", {xc, coef})}));
}

void LpNormGrad(GradContext& c) {
  const int rank = grad::Rank(c, c.X(0), "X");
  const int64_t p = c.node().attr_int("p", 2);
  if (p != 1 && p != 2) c.Fail("p must be 1 or 2");
  const std::vector<int64_t> axes{NormalizeAxis(c.node().attr_int("axis", -1), rank, c.node().Describe())};
  Value* x = c.X(0);
  const char* norm_op = p == 2 ? "ReduceL2" : "ReduceL1";
  Value* norm =
      c.node().opset >= 18 ? c.Op(norm_op, {x, c.Ints(axes)}) : c.Op(norm_op, {x}, {{"axes", Attribute::Ints(axes)}});
  Value* s = grad::ReduceSumAxes(c, c.Op("Mul", {c.dY(0), c.Y(0)}), axes, /*keepdims=*/true);
  Value* dir = p == 2 ? c.Y(0) : c.Op("Sign", {x});
  Value* g = c.Op("Div", {c.Op("Sub", {c.dY(0), c.Op("Mul", {dir, s})}), norm});
  c.SetGrad(0, c.Op("Where", {c.Op("Equal", {norm, c.Scalar(0.0, norm)}), c.Scalar(0.0, x), g}));
}

}  // namespace

void RegisterInstanceNormGrad(OpRegistry& r) {
  r.SetGrad("", "InstanceNormalization", InstanceNormGrad);
  r.SetGrad("", "LpNormalization", LpNormGrad);
  r.SetGrad("", "MeanVarianceNormalization", MeanVarianceNormGrad);
}

}  // namespace ot
