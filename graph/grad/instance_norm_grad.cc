// Gradient rules of InstanceNormalization, MeanVarianceNormalization and LpNormalization, with standard ops.
// InstanceNormalization, per (n, c) plane over the spatial axes S:
//   mean = E_S[X], xc = X - mean, var = E_S[xc^2] (biased, as the forward), inv = 1 / sqrt(var + epsilon),
//   xhat = xc * inv, Y = scale * xhat + B
//   dxhat = dY * scale
//   dX     = inv * (dxhat - E_S[dxhat] - xhat * E_S[dxhat * xhat])
//   dScale = sum over N and S of dY * xhat;   dB = sum over N and S of dY
// The statistics are recomputed from X (the forward node has no saved-statistics outputs).
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
  std::vector<int64_t> spatial, per_channel{0}, channel_view;
  for (int i = 2; i < rank; ++i) {
    spatial.push_back(i);
    per_channel.push_back(i);
    channel_view.push_back(i - 1);  // scale [C] -> [C, 1, ...] against [N, C, ...]
  }
  Value* x = c.X(0);
  Value* eps = c.Scalar(c.node().attr_float("epsilon", 1e-5f), x);
  Value* xc = c.Op("Sub", {x, MeanAxes(c, x, spatial)});
  Value* var = MeanAxes(c, c.Op("Mul", {xc, xc}), spatial);
  Value* inv = c.Op("Reciprocal", {c.Op("Sqrt", {c.Op("Add", {var, eps})})});
  Value* xhat = c.Op("Mul", {xc, inv});
  if (c.needs_grad(0)) {
    Value* dxhat = c.Op("Mul", {c.dY(0), grad::UnsqueezeAxes(c, c.X(1), channel_view)});
    Value* t = c.Op("Sub", {dxhat, MeanAxes(c, dxhat, spatial)});
    t = c.Op("Sub", {t, c.Op("Mul", {xhat, MeanAxes(c, c.Op("Mul", {dxhat, xhat}), spatial)})});
    c.SetGrad(0, c.Op("Mul", {inv, t}));
  }
  if (c.needs_grad(1))
    c.SetGrad(1, grad::ReduceSumAxes(c, c.Op("Mul", {c.dY(0), xhat}), per_channel, /*keepdims=*/false));
  if (c.needs_grad(2)) c.SetGrad(2, grad::ReduceSumAxes(c, c.dY(0), per_channel, /*keepdims=*/false));
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
