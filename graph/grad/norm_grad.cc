// Gradient rules of Softmax, LogSoftmax, the losses (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss),
// LayerNormalization, BatchNormalization, Erf, Pow and Gelu, and the schemas of the fused internal backward ops
// they emit (CPU kernels in executor/kernels/internal_norm.cc):
//   SoftmaxGrad(dY, Y) {axis, log, legacy} -> dX
//     log = 0: dX = Y * (dY - sum(dY * Y));  log = 1 (Y = LogSoftmax): dX = dY - exp(Y) * sum(dY).
//     The sum runs along `axis` (opset >= 13), or over the flattened dims [axis, rank) when legacy = 1
//     (opset < 13's 2-D coercion).
//   LossGrad(dLoss, X, labels[, weights]) {reduction, ignore_index, softmax} -> dX
//     softmax = 1 (SoftmaxCrossEntropyLoss, X = scores): dX = (softmax(X) - onehot(t)) * w[t] * g;
//     softmax = 0 (NegativeLogLikelihoodLoss, X = log-probabilities): dX = -onehot(t) * w[t] * g, where
//     g = dLoss[n, d...] (none), dLoss (sum), dLoss / sum of the weights of non-ignored targets (mean).
//     Attribute `to` (optional): dX's type when it differs from X's (float16/bfloat16 from float32 scores).
//   LayerNormGrad(dY, X, Scale) {axis, epsilon} -> dX, dScale, dB   (statistics recomputed from X; Scale may be
//     broadcast to the normalized shape X.shape[axis:], dScale and dB have that shape)
//   BatchNormGrad(dY, X, scale[, mean, var][, R]) {epsilon, training, relu, sum_keepdims} -> dX, dScale, dB[, dXsum]
//     training = 1: through the batch statistics; training = 0: mean/var are constants. The rule emits the first
//     three inputs (five in inference) and outputs; passes/fuse_batch_norm.cc folds neighbours in: relu = 1 (dY is
//     the gradient of R = Relu(Y), input 5, masked as ReluGrad does), dXsum (dX summed over all axes but 1, with
//     them as 1s when sum_keepdims = 1: the bias gradient of a convolution feeding the norm).
//   GeluGrad(dY, X) {approximate} -> dX   (dX = dY * Gelu'(X), the formulas above the Gelu rule; dY and X share
//     one dtype and shape; kernel: executor/kernels/gelu_grad.cc, fp32 math inside for the half types). One fused
//     op instead of the Erf/Exp (or Tanh) expression so that under AMP (an infer op) the backward of GELU stays in
//     half: the expression's Exp is a deny op that forced an fp32 copy of every GELU input.
#include <cmath>
#include <map>
#include <string>

#include "graph/grad/grad_rules.h"
#include "graph/grad_context.h"
#include "graph/infer_util.h"
#include "graph/op_registry.h"

namespace ot {

namespace {

void RegisterSchemas(OpRegistry& r) {
  auto like = [](int in) {
    return [in](InferContext& ctx) { ctx.set_output(0, ctx.input_type(in), ctx.input_shape(in)); };
  };
  OpSchema sg;
  sg.op_type = "SoftmaxGrad";
  sg.domain = kInternalDomain;
  sg.infer = like(1);
  r.Register(sg);

  OpSchema lg;
  lg.op_type = "LossGrad";
  lg.domain = kInternalDomain;
  // dX like X, or of the type the attribute `to` names (a half gradient: passes/half_loss_grad.h).
  lg.infer = [](InferContext& ctx) {
    const DataType t = ctx.node.has_attr("to") ? static_cast<DataType>(ctx.node.attr_int("to", 0)) : ctx.input_type(1);
    ctx.set_output(0, t, ctx.input_shape(1));
  };
  r.Register(lg);

  // dX like X (input 1), dScale and dB like Scale (input 2).
  auto three = [](InferContext& ctx) {
    ctx.set_output(0, ctx.input_type(1), ctx.input_shape(1));
    for (int i = 1; i < 3; ++i)
      if (ctx.has_output(i)) ctx.set_output(i, ctx.input_type(2), ctx.input_shape(2));
  };
  OpSchema ln;
  ln.op_type = "LayerNormGrad";
  ln.domain = kInternalDomain;
  // dX like X; dScale and dB with the normalized shape X.shape[axis:] (the rule reduces them to Scale's and B's
  // shapes where those are broadcast).
  ln.infer = [](InferContext& ctx) {
    const Shape& x = ctx.input_shape(1);
    ctx.set_output(0, ctx.input_type(1), x);
    Shape nd;
    if (x.known_rank()) {
      const int axis = NormalizeAxis(ctx, ctx.node.attr_int("axis", -1), x.rank());
      nd = Shape(std::vector<Dim>(x.dims().begin() + axis, x.dims().end()));
    }
    for (int i = 1; i < 3; ++i)
      if (ctx.has_output(i)) ctx.set_output(i, ctx.input_type(2), nd);
  };
  r.Register(ln);

  OpSchema gg;
  gg.op_type = "GeluGrad";
  gg.domain = kInternalDomain;
  gg.infer = [](InferContext& ctx) {
    const Shape& dy = ctx.Require(0);
    const Shape& x = ctx.Require(1);
    const DataType t = ctx.input_type(1);
    if (t != DataType::kUndefined && !IsFloat(t)) ctx.Fail("GeluGrad of " + DataTypeName(t));
    if (t != DataType::kUndefined && ctx.input_type(0) != DataType::kUndefined && ctx.input_type(0) != t)
      ctx.Fail("dY (" + DataTypeName(ctx.input_type(0)) + ") and X (" + DataTypeName(t) + ") differ in dtype");
    if (dy.known_rank() && x.known_rank() && dy.is_static() && x.is_static() && !(dy == x))
      ctx.Fail("dY and X differ in shape");
    const std::string a = ctx.node.attr_string("approximate", "none");
    if (a != "none" && a != "tanh") ctx.Fail("approximate = '" + a + "' (none or tanh)");
    ctx.set_output(0, t, x);
  };
  r.Register(gg);

  OpSchema bn;
  bn.op_type = "BatchNormGrad";
  bn.domain = kInternalDomain;
  bn.infer = [three](InferContext& ctx) {
    three(ctx);
    if (!ctx.has_output(3)) return;
    if (ctx.node.attr_int("channels_last", 0) != 0) ctx.Fail("the dX-sum output (3) is not made for channels_last");
    const Shape& x = ctx.input_shape(1);
    Shape s;
    if (x.known_rank() && x.rank() >= 2) {
      std::vector<Dim> d{x[1]};
      if (ctx.node.attr_int("sum_keepdims", 0) != 0) {
        d.assign(static_cast<size_t>(x.rank()), Dim(1));
        d[1] = x[1];
      }
      s = Shape(d);
    }
    ctx.set_output(3, ctx.input_type(1), s);
  };
  r.Register(bn);

  // ai.onnxtrain.Gelu and ai.onnxtrain.LayerNormalization: the ONNX ops (same inference, kernels and gradient
  // rules) for the pattern-fusion passes in models whose ai.onnx opset predates them (Gelu 20, LayerNormalization
  // 17): a fused ai.onnx node there would name an op its model's opset lacks, and the exported step would not load
  // again (passes/fuse_gelu.h).
  for (const char* op : {"Gelu", "LayerNormalization"}) {
    const OpSchema* onnx = r.Find("", op);
    if (!onnx) continue;
    OpSchema alias = *onnx;
    alias.domain = kInternalDomain;
    alias.min_opset = 1;
    r.Register(alias);
  }
}

Attribute I(int64_t v) { return Attribute::Int(v); }

void SoftmaxRule(GradContext& c, bool log) {
  const Node& n = c.node();
  const bool legacy = n.opset < 13;
  const int64_t axis = n.attr_int("axis", legacy ? 1 : -1);
  c.SetGrad(0, c.Op("SoftmaxGrad", {c.dY(0), c.Y(0)}, {{"axis", I(axis)}, {"log", I(log)}, {"legacy", I(legacy)}},
                    kInternalDomain));
}

void LossRule(GradContext& c, bool softmax) {
  const Node& n = c.node();
  std::map<std::string, Attribute> attrs = {{"reduction", Attribute::String(n.attr_string("reduction", "mean"))},
                                            {"softmax", I(softmax)}};
  if (n.has_attr("ignore_index")) attrs["ignore_index"] = I(n.attr_int("ignore_index", 0));
  Value* dx = nullptr;
  if (c.dY(0)) {
    std::vector<Value*> ins = {c.dY(0), c.X(0), c.X(1)};
    if (n.has_input(2)) ins.push_back(c.X(2));
    dx = c.Op("LossGrad", ins, attrs, kInternalDomain);
  }
  // SoftmaxCrossEntropyLoss's optional log_prob output: LogSoftmax along axis 1.
  if (softmax && c.dY(1)) {
    Value* lp =
        c.Op("SoftmaxGrad", {c.dY(1), c.Y(1)}, {{"axis", I(1)}, {"log", I(1)}, {"legacy", I(0)}}, kInternalDomain);
    dx = dx ? c.Op("Add", {dx, lp}) : lp;
  }
  if (dx) c.SetGrad(0, dx);
}

}  // namespace

void RegisterNormGrads(OpRegistry& r) {
  RegisterSchemas(r);

  r.SetGrad("", "Softmax", [](GradContext& c) { SoftmaxRule(c, false); });
  r.SetGrad("", "LogSoftmax", [](GradContext& c) { SoftmaxRule(c, true); });
  r.SetGrad("", "SoftmaxCrossEntropyLoss", [](GradContext& c) { LossRule(c, true); }, {1, 2});
  r.SetGrad("", "NegativeLogLikelihoodLoss", [](GradContext& c) { LossRule(c, false); }, {1, 2});

  const GradFn layer_norm = [](GradContext& c) {
    const Node& n = c.node();
    if (c.dY(1) || c.dY(2)) c.Fail("gradients through the Mean/InvStdDev outputs are not supported");
    auto outs =
        c.OpN("LayerNormGrad", {c.dY(0), c.X(0), c.X(1)}, 3,
              {{"axis", I(n.attr_int("axis", -1))}, {"epsilon", Attribute::Float(n.attr_float("epsilon", 1e-5f))}},
              kInternalDomain);
    if (c.needs_grad(0)) c.SetGrad(0, outs[0]);
    for (int i = 1; i < 3; ++i)
      if (c.needs_grad(i)) c.SetGrad(i, c.ReduceToShape(outs[i], c.X(i)));
  };
  r.SetGrad("", "LayerNormalization", layer_norm);
  r.SetGrad(kInternalDomain, "LayerNormalization", layer_norm);

  r.SetGrad("", "BatchNormalization",
            [](GradContext& c) {
              const Node& n = c.node();
              if (n.opset < 9 && n.attr_int("spatial", 1) == 0) c.Fail("spatial = 0 is not supported");
              bool training;
              if (n.opset >= 14)
                training = n.attr_int("training_mode", 0) != 0;
              else if (n.opset >= 7)
                training = n.outputs.size() > 1 && (n.has_output(1) || n.has_output(2));
              else
                training = n.attr_int("is_test", 0) == 0;
              for (size_t i = 1; i < n.outputs.size(); ++i)
                if (c.dY(static_cast<int>(i)))
                  c.Fail("gradients through the running/saved statistics are not supported");
              std::vector<Value*> ins = {c.dY(0), c.X(0), c.X(1)};
              if (!training) {
                ins.push_back(c.X(3));
                ins.push_back(c.X(4));
              }
              std::map<std::string, Attribute> attrs{{"epsilon", Attribute::Float(n.attr_float("epsilon", 1e-5f))},
                                                     {"training", I(training)}};
              if (n.attr_int("channels_last", 0) != 0) attrs["channels_last"] = I(1);  // X, dY [N, spatial..., C]
              auto outs = c.OpN("BatchNormGrad", ins, 3, attrs, kInternalDomain);
              for (int i = 0; i < 3; ++i)
                if (c.needs_grad(i)) c.SetGrad(i, outs[i]);
            },
            {3, 4});

  // dX = dY * 2/sqrt(pi) * exp(-X^2)
  r.SetGrad("", "Erf", [](GradContext& c) {
    Value* e = c.Op("Exp", {c.Op("Neg", {c.Op("Mul", {c.X(0), c.X(0)})})});
    c.SetGrad(0, c.Op("Mul", {c.dY(0), c.Op("Mul", {e, c.Scalar(2.0 / std::sqrt(M_PI), c.X(0))})}));
  });

  // Y = X^E: dX = dY * E * X^(E-1);  dE = dY * Y * log(X).
  r.SetGrad("", "Pow", [](GradContext& c) {
    Value* x = c.X(0);
    Value* e = c.X(1);
    if (c.needs_grad(0)) {
      Value* ef = e->dtype == x->dtype ? e : c.Op("Cast", {e}, {{"to", I(static_cast<int64_t>(x->dtype))}});
      Value* p = c.Op("Pow", {x, c.Op("Sub", {ef, c.Scalar(1.0, ef)})});
      c.SetGrad(0, c.ReduceToShape(c.Op("Mul", {c.dY(0), c.Op("Mul", {ef, p})}), x));
    }
    if (c.needs_grad(1)) {
      if (e->dtype != x->dtype) c.Fail("gradient of an exponent of another dtype than the base");
      c.SetGrad(1, c.ReduceToShape(c.Op("Mul", {c.dY(0), c.Op("Mul", {c.Y(0), c.Op("Log", {x})})}), e));
    }
  });

  // approximate = none: dX = dY * (Phi(x) + x * phi(x)), Phi(x) = (1 + erf(x / sqrt 2)) / 2,
  //   phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
  // approximate = tanh: u = k (x + a x^3), t = tanh(u), Y = x (1 + t) / 2:
  //   dX = dY * ((1 + t) / 2 + x (1 - t^2) k (1 + 3 a x^2) / 2), k = sqrt(2/pi), a = 0.044715.
  // The fused GeluGrad (see the schema comment) computes, for approximate = tanh (k = sqrt(2/pi), a = 0.044715,
  // t = tanh(k (x + a x^3))):  dX = dY * ((1 + t) / 2 + x (1 - t^2) k (1 + 3 a x^2) / 2);
  // for approximate = none:    dX = dY * (Phi(x) + x phi(x)), Phi(x) = (1 + erf(x / sqrt 2)) / 2,
  //   phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
  const GradFn gelu = [](GradContext& c) {
    c.SetGrad(0,
              c.Op("GeluGrad", {c.dY(0), c.X(0)},
                   {{"approximate", Attribute::String(c.node().attr_string("approximate", "none"))}}, kInternalDomain));
  };
  r.SetGrad("", "Gelu", gelu);
  r.SetGrad(kInternalDomain, "Gelu", gelu);
}

}  // namespace ot
