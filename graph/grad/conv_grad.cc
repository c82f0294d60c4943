// Gradient rules of Conv and pooling, and the internal ops they emit (domain ai.onnxtrain). The internal ops
// carry the forward node's geometry attributes (group, strides, dilations, pads, auto_pad, kernel_shape,
// ceil_mode, count_include_pad) unchanged, so the kernels derive the same geometry as the forward did.
//   ConvGradData(dY, W, shape(X)) -> dX       (a transposed convolution of dY with W)
//   ConvGradWeight(dY, X, shape(W)) -> dW
//   MaxPoolGrad(dY, X) -> dX                  (dY routed to each window's argmax, recomputed from X)
//   AveragePoolGrad(dY, shape(X)) -> dX       (dY / window count spread over each window)
// dB of Conv is ReduceSum(dY) over the batch and spatial axes; GlobalAveragePool's gradient is dY broadcast
// back and divided by the spatial size.
#include "graph/grad/grad_rules.h"
#include "graph/grad_context.h"
#include "graph/infer_util.h"
#include "graph/op_registry.h"

namespace ot {

namespace {

// Output 0 has input `like`'s dtype and the shape given by the value of input `shape_in` (or X's shape when
// shape_in names a data input).
InferFn ShapeFromInput(int like, int shape_in, bool shape_is_value) {
  return [=](InferContext& ctx) {
    if (!shape_is_value) {
      ctx.set_output(0, ctx.input_type(like), ctx.input_shape(shape_in));
      return;
    }
    if (auto v = InputInts(ctx, shape_in)) {
      ctx.set_output(0, ctx.input_type(like), Shape::Static(*v));
      return;
    }
    const Shape& s = ctx.input_shape(shape_in);
    ctx.set_output(
        0, ctx.input_type(like),
        s.known_rank() && s.rank() == 1 && s[0].is_static() ? UnknownDims(static_cast<int>(s[0].value)) : Shape());
  };
}

void RegisterInternal(OpRegistry& r, const char* op, InferFn infer, std::vector<int> value_inputs) {
  OpSchema s;
  s.op_type = op;
  s.domain = kInternalDomain;
  s.infer = std::move(infer);
  s.value_inputs = std::move(value_inputs);
  r.Register(std::move(s));
}

// The forward node's attributes minus those that do not describe the geometry.
std::map<std::string, Attribute> GeometryAttrs(const GradContext& c) {
  std::map<std::string, Attribute> a;
  for (const auto& [k, v] : c.node().attrs)
    if (k != "storage_order") a[k] = v;
  return a;
}

// ReduceSum over `axes`, keepdims=0, in the form of the graph's opset.
Value* ReduceSumAxes(GradContext& c, Value* v, const std::vector<int64_t>& axes) {
  if (c.node().opset >= 13) return c.Op("ReduceSum", {v, c.Ints(axes)}, {{"keepdims", Attribute::Int(0)}});
  return c.Op("ReduceSum", {v}, {{"axes", Attribute::Ints(axes)}, {"keepdims", Attribute::Int(0)}});
}

}  // namespace

void RegisterConvGrads(OpRegistry& r) {
  RegisterInternal(r, "ConvGradData", ShapeFromInput(0, 2, true), {2});
  RegisterInternal(r, "ConvGradWeight", ShapeFromInput(0, 2, true), {2});
  RegisterInternal(r, "MaxPoolGrad", ShapeFromInput(0, 1, false), {});
  RegisterInternal(r, "AveragePoolGrad", ShapeFromInput(0, 1, true), {1});

  r.SetGrad("", "Conv", [](GradContext& c) {
    auto attrs = GeometryAttrs(c);
    if (c.needs_grad(0))
      c.SetGrad(0, c.Op("ConvGradData", {c.dY(0), c.X(1), c.Op("Shape", {c.X(0)})}, attrs, kInternalDomain));
    if (c.needs_grad(1))
      c.SetGrad(1, c.Op("ConvGradWeight", {c.dY(0), c.X(0), c.Op("Shape", {c.X(1)})}, attrs, kInternalDomain));
    if (c.node().has_input(2) && c.needs_grad(2)) {
      const Shape& y = c.dY(0)->shape;
      if (!y.known_rank()) c.Fail("output rank must be known");
      // Every axis but the channels': axis 1, or the last with channels_last (carried to the gradient ops too).
      const bool last = c.node().attr_int("channels_last", 0) != 0;
      std::vector<int64_t> axes{0};
      for (int i = last ? 1 : 2; i < (last ? y.rank() - 1 : y.rank()); ++i) axes.push_back(i);
      c.SetGrad(2, ReduceSumAxes(c, c.dY(0), axes));
    }
  });

  r.SetGrad("", "MaxPool", [](GradContext& c) {
    // storage_order only changes how Indices are numbered, not the gradient; Indices get none.
    c.SetGrad(0, c.Op("MaxPoolGrad", {c.dY(0), c.X(0)}, GeometryAttrs(c), kInternalDomain));
  });

  r.SetGrad("", "AveragePool", [](GradContext& c) {
    c.SetGrad(0, c.Op("AveragePoolGrad", {c.dY(0), c.Op("Shape", {c.X(0)})}, GeometryAttrs(c), kInternalDomain));
  });

  // dX = Expand(dY, shape(X)) / (spatial size); the count is Size(X) / Size(Y), folded when the plan is made.
  r.SetGrad("", "GlobalAveragePool", [](GradContext& c) {
    Value* count = c.Op("Div", {c.Op("Size", {c.X(0)}), c.Op("Size", {c.Y(0)})});
    Value* countf = c.Op("Cast", {count}, {{"to", Attribute::Int(static_cast<int64_t>(c.X(0)->dtype))}});
    c.SetGrad(0, c.Op("Div", {c.Op("Expand", {c.dY(0), c.Op("Shape", {c.X(0)})}), countf}));
  });
}

}  // namespace ot
