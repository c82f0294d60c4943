// Op schemas of the norm family: Softmax/LogSoftmax/Hardmax, BatchNormalization, LayerNormalization,
// InstanceNormalization, MeanVarianceNormalization, LpNormalization, NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss.
#include "graph/infer_util.h"
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {

namespace {

void RequireFloat(const InferContext& ctx, int i) {
  if (!IsFloat(ctx.input_type(i)))
    ctx.Fail("input " + std::to_string(i) + " must be a float tensor, got " + DataTypeName(ctx.input_type(i)));
}

// Softmax family: opset < 13 flattens to 2-D at `axis` (default 1), opset >= 13 uses one axis (default -1).
void InferSoftmax(InferContext& ctx) {
  const Shape& in = ctx.Require(0);
  RequireFloat(ctx, 0);
  if (in.known_rank()) {
    const int64_t def = ctx.opset() >= 13 ? -1 : 1;
    const int64_t axis = ctx.node.attr_int("axis", def);
    // Before opset 13, axis == rank is allowed (an empty tail).
    if (!(ctx.opset() < 13 && axis == in.rank())) NormalizeAxis(ctx, axis, in.rank());
  }
  PropagateInput0(ctx);
}

// Checks that a per-channel parameter has `c` elements (when both are known).
void CheckChannelParam(const InferContext& ctx, int i, const Dim& c, const char* what) {
  if (!ctx.has_input(i)) return;
  const Shape& s = ctx.input_shape(i);
  if (!s.known_rank()) return;
  if (s.rank() != 1) return;  // opset < 9 with spatial = 0 allows [C, D1, ...]; the kernel checks sizes
  if (s[0].is_static() && c.is_static() && s[0].value != c.value)
    ctx.Fail(std::string(what) + " has " + std::to_string(s[0].value) + " elements, expected " +
             std::to_string(c.value) + " (the channel count)");
}

void InferBatchNorm(InferContext& ctx) {
  const Shape& x = ctx.Require(0);
  for (int i = 1; i < 5; ++i) ctx.Require(i);
  RequireFloat(ctx, 0);
  Dim c;
  // channels_last = 1 (the CPU's channels_last pass): X is [N, spatial..., C].
  const bool last = ctx.node.attr_int("channels_last", 0) != 0;
  if (x.known_rank()) {
    if (x.rank() < 2) ctx.Fail("X must have rank >= 2 (N, C, ...), got " + x.ToString());
    c = last ? x[x.rank() - 1] : x[1];
  }
  CheckChannelParam(ctx, 1, c, "scale");
  CheckChannelParam(ctx, 2, c, "B");
  CheckChannelParam(ctx, 3, c, "input_mean");
  CheckChannelParam(ctx, 4, c, "input_var");
  // Types: scale and B share ONNX's T1, input_mean and input_var T2 (opset >= 15 lets them differ from X's T).
  // Each is X's type or float32 (half X with float32 parameters and statistics is what the amp pass emits);
  // anything else (a bfloat16 X with a float16 scale) is a mistake, not a precision choice.
  const DataType xt = ctx.input_type(0);
  auto check_pair = [&](int a, int b, const char* what) {
    const DataType t = ctx.input_type(a);
    if (ctx.input_type(b) != t)
      ctx.Fail(std::string(what) + " must share one dtype, got " + DataTypeName(t) + " and " +
               DataTypeName(ctx.input_type(b)));
    if (t != xt && t != DataType::kFloat32)
      ctx.Fail(std::string(what) + " must be " + DataTypeName(xt) + " (X's dtype) or float32, got " + DataTypeName(t));
  };
  check_pair(1, 2, "scale and B");
  check_pair(3, 4, "input_mean and input_var");
  PropagateInput0(ctx);
  for (int i = 1; i < ctx.num_outputs(); ++i) {
    if (!ctx.has_output(i)) continue;
    const int src = i == 2 || i == 4 ? 4 : 3;
    ctx.set_output(i, ctx.input_type(src), ctx.input_shape(src));
  }
}

void InferLayerNorm(InferContext& ctx) {
  const Shape& x = ctx.Require(0);
  ctx.Require(1);
  RequireFloat(ctx, 0);
  const int64_t stash = ctx.node.attr_int("stash_type", 1);
  if (stash != 1) ctx.Unsupported("stash_type " + std::to_string(stash) + " (only 1, float32, is supported)");
  PropagateInput0(ctx);
  if (!x.known_rank()) {
    for (int i = 1; i < 3; ++i)
      if (ctx.has_output(i)) ctx.set_output(i, DataType::kFloat32, Shape());
    return;
  }
  const int axis = NormalizeAxis(ctx, ctx.node.attr_int("axis", -1), x.rank());
  for (int i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    const Shape& p = ctx.input_shape(i);
    if (!p.known_rank()) continue;
    if (p.rank() > x.rank() - axis)
      ctx.Fail(std::string(i == 1 ? "Scale" : "B") + " has shape " + p.ToString() +
               ", more dims than the normalized shape");
    // Each dim must broadcast against the normalized dims (right-aligned).
    for (int d = 0; d < p.rank(); ++d) {
      const Dim& a = p[d];
      const Dim& b = x[x.rank() - p.rank() + d];
      if (a.is_static() && b.is_static() && a.value != 1 && a.value != b.value)
        ctx.Fail(std::string(i == 1 ? "Scale" : "B") + " shape " + p.ToString() +
                 " does not broadcast to the normalized shape of " + x.ToString());
    }
  }
  std::vector<Dim> stat;
  for (int d = 0; d < x.rank(); ++d) stat.push_back(d < axis ? x[d] : Dim(1));
  for (int i = 1; i < 3; ++i)
    if (ctx.has_output(i)) ctx.set_output(i, DataType::kFloat32, Shape(stat));
}

void InferInstanceNorm(InferContext& ctx) {
  const Shape& x = ctx.Require(0);
  ctx.Require(1);
  ctx.Require(2);
  RequireFloat(ctx, 0);
  Dim c;
  if (x.known_rank()) {
    if (x.rank() < 2) ctx.Fail("input must have rank >= 2 (N, C, ...), got " + x.ToString());
    c = x[1];
  }
  CheckChannelParam(ctx, 1, c, "scale");
  CheckChannelParam(ctx, 2, c, "B");
  PropagateInput0(ctx);
}

void InferMvn(InferContext& ctx) {
  const Shape& x = ctx.Require(0);
  RequireFloat(ctx, 0);
  if (x.known_rank())
    for (int64_t a : ctx.node.attr_ints("axes", {0, 2, 3})) NormalizeAxis(ctx, a, x.rank());
  PropagateInput0(ctx);
}

void InferLpNorm(InferContext& ctx) {
  const Shape& x = ctx.Require(0);
  RequireFloat(ctx, 0);
  const int64_t p = ctx.node.attr_int("p", 2);
  if (p != 1 && p != 2) ctx.Fail("p must be 1 or 2, got " + std::to_string(p));
  if (x.known_rank()) NormalizeAxis(ctx, ctx.node.attr_int("axis", -1), x.rank());
  PropagateInput0(ctx);
}

// NegativeLogLikelihoodLoss (input 0 = log-probabilities) and SoftmaxCrossEntropyLoss (input 0 = scores):
// input [N, C, d1...], target [N, d1...], optional weight [C].
void InferLoss(InferContext& ctx) {
  const Shape& x = ctx.Require(0);
  const Shape& t = ctx.Require(1);
  RequireFloat(ctx, 0);
  if (ctx.input_type(1) != DataType::kInt32 && ctx.input_type(1) != DataType::kInt64)
    ctx.Fail("target must be int32 or int64, got " + DataTypeName(ctx.input_type(1)));
  const std::string red = ctx.node.attr_string("reduction", "mean");
  if (red != "none" && red != "sum" && red != "mean") ctx.Fail("reduction must be none, sum or mean, got " + red);
  if (x.known_rank()) {
    if (x.rank() < 2) ctx.Fail("input must have rank >= 2 (N, C, ...), got " + x.ToString());
    if (t.known_rank()) {
      if (t.rank() != x.rank() - 1)
        ctx.Fail("target shape " + t.ToString() + " does not match input shape " + x.ToString());
      for (int d = 0; d < t.rank(); ++d) {
        const Dim& a = x[d == 0 ? 0 : d + 1];
        if (a.is_static() && t[d].is_static() && a.value != t[d].value)
          ctx.Fail("target shape " + t.ToString() + " does not match input shape " + x.ToString());
      }
    }
    if (ctx.has_input(2)) {
      const Shape& w = ctx.input_shape(2);
      if (w.known_rank() && (w.rank() != 1 || (w[0].is_static() && x[1].is_static() && w[0].value != x[1].value)))
        ctx.Fail("weight shape " + w.ToString() + " does not match the class count " + x[1].ToString());
    }
  }
  if (red == "none") {
    if (x.known_rank()) {
      std::vector<Dim> out;
      for (int d = 0; d < x.rank(); ++d)
        if (d != 1) out.push_back(x[d]);
      ctx.set_output(0, ctx.input_type(0), Shape(out));
    } else {
      ctx.set_output(0, ctx.input_type(0), t);
    }
  } else {
    ctx.set_output(0, ctx.input_type(0), Shape::Scalar());
  }
  if (ctx.has_output(1)) ctx.set_output(1, ctx.input_type(0), x);
}

void Add(OpRegistry& r, const char* op, int min_opset, InferFn fn) {
  OpSchema s;
  s.op_type = op;
  s.min_opset = min_opset;
  s.infer = std::move(fn);
  r.Register(std::move(s));
}

}  // namespace

void RegisterNormOps(OpRegistry& r) {
  Add(r, "Softmax", 1, InferSoftmax);
  Add(r, "LogSoftmax", 1, InferSoftmax);
  Add(r, "Hardmax", 1, InferSoftmax);
  Add(r, "BatchNormalization", 6, InferBatchNorm);
  Add(r, "LayerNormalization", 17, InferLayerNorm);
  Add(r, "InstanceNormalization", 6, InferInstanceNorm);
  Add(r, "MeanVarianceNormalization", 9, InferMvn);
  Add(r, "LpNormalization", 1, InferLpNorm);
  Add(r, "NegativeLogLikelihoodLoss", 12, InferLoss);
  Add(r, "SoftmaxCrossEntropyLoss", 12, InferLoss);
}

}  // namespace ot
